"""How deeply input may nest, and the error beyond that.

Every walk of the IR recurses, and so does libclang: how deep they can go is set by
``polypy.stack`` (the stages run on a 1 GiB stack). Input nested deeper than the limits here is
refused with a located ``UserError`` -- "expression nested too deeply (N levels; the limit is
M)" -- before a walk can run out of stack:

* ``MAX_DEPTH`` levels of IR: each expression node and each statement counts one level, so a
  sum of 100,000 terms (a left-deep tree) is 100,000 levels and 1,000 nested ``if``s are 1,000
  (plus the expressions inside the innermost). Checked on each kernel the frontend builds
  (``check_depth``); the frontend itself refuses the same way where its own walk gives out
  first.
* ``MAX_ANALYZED_NODES``: not a refusal; larger expressions are translated, but the exact
  analyses see them as unknown values (see the constant).
* ``MAX_BRACKETS`` nested brackets (parentheses, braces, square brackets), checked by clang
  (``-fbracket-depth``) while it parses; deeper, clang's parser recursion is what would run out.
"""
from __future__ import annotations

from polypy.errors import Loc, UserError
from polypy.ir import nodes as n

MAX_DEPTH = 200_000
MAX_BRACKETS = 10_000
# Expressions with more nodes than this are opaque to the exact analyses (isl's affine forms,
# the thread-loop linear forms): an unknown value or condition, which every analysis already
# treats conservatively. Index and guard expressions of real kernels have tens of nodes; the
# analyses' cost grows faster than linearly with a form's size (an isl operation per level).
MAX_ANALYZED_NODES = 500
# Conditions under which a load runs (the ``&&``, ``||`` and ``?:`` around it) that the
# polyhedral model intersects into the load's domain; beyond these the domain is a superset,
# marked inexact, as for any condition it cannot model (``polypy.poly.paths.RawAccess``).
MAX_GUARDS = 64


def too_deep(levels: int, limit: int, loc: Loc | None, *, at_least: bool = False, what: str = "levels") -> UserError:
    """The refusal of input nested deeper than ``limit``; ``at_least``: ``levels`` is a lower bound."""
    count = f"over {limit:,}" if at_least else f"{levels:,}"
    return UserError(f"expression nested too deeply ({count} {what}; the limit is {limit:,})", loc)


def nesting_depth(root: n.Node) -> tuple[int, Loc | None]:
    """The depth of the deepest node under ``root`` (``root`` is level 1), and where the
    nesting first passes ``MAX_DEPTH`` (the location of the innermost located node on the
    way down; None when it does not). A loop, not a recursion: it must work where walks fail."""
    deepest = 0
    crossing: Loc | None = None
    stack: list[tuple[n.Node, int, Loc | None]] = [(root, 1, root.loc)]
    while stack:
        node, depth, loc = stack.pop()
        loc = node.loc or loc
        if depth > deepest:
            deepest = depth
            if depth == MAX_DEPTH + 1 and crossing is None:
                crossing = loc
        for name in node.CHILDREN:
            value = getattr(node, name)
            if isinstance(value, n.Node):
                stack.append((value, depth + 1, loc))
            elif isinstance(value, tuple):
                stack.extend((item, depth + 1, loc) for item in value if isinstance(item, n.Node))
    return deepest, crossing


def check_depth(kernel: n.Kernel) -> None:
    """Refuse a kernel nested deeper than ``MAX_DEPTH`` (see the module docstring)."""
    for stmt in kernel.body:
        depth, crossing = nesting_depth(stmt)
        if depth > MAX_DEPTH:
            raise too_deep(depth, MAX_DEPTH, crossing or stmt.loc or kernel.loc)
