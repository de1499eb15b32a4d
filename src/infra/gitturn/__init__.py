"""Git's turns: git commands that take a repository lock run one at a time per clone, in order.

`lockyard git-turn` runs in front of an agent's git command line. It takes a numbered ticket
in `<git common dir>/lockyard/git-turns/` (one line for every worktree of the clone), waits
until every earlier ticket's command line has ended and git's own lock files are free, and
exits 0, so the line goes on with the turn. The turn belongs to the shell that runs the line
(its parent): it ends when that shell ends, killed or not, with no hook afterwards. Standard
library and lockyard's /proc reader only: it runs in front of every agent git command line.
"""
