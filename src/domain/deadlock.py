"""The deadlock monitor's public face: the wait-for graph, the monitor and the victim policy."""

from __future__ import annotations

from ..core.deadlock_info import CycleStep, DeadlockInfo
from .graph import Cycle, GraphSnapshot, WaitForGraph
from .monitor import DeadlockMonitor, MonitorSnapshot, OnDeadlock, VerifyCycle
from .victim import AgentInfo, VictimPolicy, cheapest_then_youngest, explain_choice, victim_cost

__all__ = [
    "AgentInfo",
    "Cycle",
    "CycleStep",
    "DeadlockInfo",
    "DeadlockMonitor",
    "GraphSnapshot",
    "MonitorSnapshot",
    "OnDeadlock",
    "VerifyCycle",
    "VictimPolicy",
    "WaitForGraph",
    "cheapest_then_youngest",
    "explain_choice",
    "victim_cost",
]
