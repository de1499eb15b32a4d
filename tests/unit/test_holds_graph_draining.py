"""Property: a directory or glob lock's wait for the holds below it (`holds_graph.waits_below`)
is drawn only while it drains, to every other agent's hold below it, and to their reads only
for an exclusive request, over drawn holds and reads of files, directories and globs."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from lockyard.infra.lockstore.holds_graph import waits_below
from lockyard.infra.lockstore.records import HolderRecord, LockInfo, shared_node
from lockyard.infra.lockstore.scope_keys import is_above

KEYS = ("src/", "src/api/", "src/a.py", "src/api/b.py", "src/**/*.py", "src/api/*.py", "docs/")
AGENTS = ("ann", "bob", "cid")


def record(key: str, agent: str, *, mode: str, draining: bool) -> HolderRecord:
    return HolderRecord(
        agent_id=agent, token=f"{agent}-{key}", pid=1, start_time=None, host="h", boot_id=None,
        lock_path=key, namespace="ns", acquired_at=0.0, mode=mode, draining=draining,
    )  # fmt: skip


holds = st.dictionaries(
    st.sampled_from(KEYS),
    st.tuples(
        st.one_of(
            st.none(),
            st.tuples(
                st.sampled_from(AGENTS), st.sampled_from(["exclusive", "shared"]), st.booleans()
            ),
        ),
        st.lists(
            st.tuples(st.sampled_from(AGENTS), st.booleans()), max_size=2, unique_by=lambda r: r[0]
        ),
    ),
)


@settings(max_examples=200)
@given(holds)
def test_only_a_draining_lock_waits_and_a_shared_one_never_for_a_read(
    drawn: dict[str, tuple[tuple[str, str, bool] | None, list[tuple[str, bool]]]],
) -> None:
    locks = []
    for key, (holder, readers) in drawn.items():
        held = (
            None if holder is None else record(key, holder[0], mode=holder[1], draining=holder[2])
        )
        members = tuple(record(key, a, mode="shared", draining=d) for a, d in readers)
        locks.append(
            LockInfo(
                lock_path=key, namespace="ns", holder=held, age_seconds=0.0, liveness="alive",
                liveness_reason="", shared_holders=members,
            )
        )  # fmt: skip
    expected = set()
    for info in locks:
        for upper in (info.holder, *info.shared_holders):
            if upper is None or not upper.draining:
                continue
            for other in locks:
                below = [] if other.holder is None else [(other.holder, other.lock_path, True)]
                below += [
                    (m, shared_node(m.lock_path, m.agent_id), False) for m in other.shared_holders
                ]
                for lower, node, exclusive in below:
                    waits = exclusive or upper.mode != "shared"  # a read: an exclusive's only
                    if (
                        waits
                        and lower.agent_id != upper.agent_id
                        and is_above(upper.lock_path, lower.lock_path)
                    ):
                        expected.add((upper.agent_id, upper.lock_path, node))
    drawn_edges = {(d.agent_id, d.lock_path, node) for d, node in waits_below(locks)}
    assert drawn_edges == expected
    assert all(d.draining for d, _node in waits_below(locks))
