"""Agent side: route an agent's proposed tool calls to MCP servers, one turn at
a time, through the engine's turn state machine (SPEC §6).

    router = McpToolRouter(rules, [session], allowed_tools=route["mcp_tools"])
    outcome = await router.run_turn(state, calls)              # state: a plain dict or None
    save(outcome.state)                                         # persist it anywhere
    outcome = await router.run_turn(saved, [], user_confirmed=shown.pending_digest)

Read-only calls that pass run at once; at most one transactional call is
selected; one that needs confirmation waits in ``pending_tool_call`` with
``transaction_status: AWAITING_CONFIRMATION``; the confirming turn runs that very
call with ``confirmed: true``. Pass the digest of the state the person was
shown (``pending_digest``) rather than ``True``: then a yes cannot land on
a call that replaced it meanwhile. The engine decides all of it: the router only
runs what the turn's ``execute`` lists, with exactly those arguments.

The state is trusted host storage: keep it server-side, never round-trip it
through the model or the client.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from ._rules import RuleSet
from ._types import Context, Surface, ToolCall, TurnState


class ToolSession(Protocol):
    """What the router needs of an MCP client session (``mcp.ClientSession``)."""

    async def list_tools(self) -> Any: ...

    async def call_tool(self, name: str, arguments: dict[str, Any] | None = None) -> Any: ...


@dataclass(frozen=True)
class ExecutedCall:
    """One call the router ran: the MCP ``CallToolResult``, or the error raised."""

    call: ToolCall
    result: Any = None
    error: BaseException | None = None

    @property
    def ok(self) -> bool:
        return self.error is None and not getattr(self.result, "isError", False)

    @property
    def structured(self) -> Any:
        """The result's ``structuredContent`` (or its first text, parsed as JSON if it is)."""
        if self.result is None:
            return None
        if getattr(self.result, "structuredContent", None) is not None:
            return self.result.structuredContent
        for block in getattr(self.result, "content", None) or ():
            text = getattr(block, "text", None)
            if text is not None:
                try:
                    return json.loads(text)
                except ValueError:
                    return text
        return None


@dataclass(frozen=True)
class TurnOutcome:
    """A turn's result: the state to persist and what ran."""

    turn: TurnState
    executed: tuple[ExecutedCall, ...] = field(default_factory=tuple)

    @property
    def state(self) -> dict[str, Any]:
        """The published state as a plain dict (``transaction_status``,
        ``pending_tool_call``, ``available_mcp_tools``, ``selected_tool_call``,
        ``tool_policy_result``, ``confirmation_required``,
        ``confirmation_received``, ``execute``, ``results``)."""
        return self.turn.as_dict()

    @property
    def transaction_status(self) -> str:
        return self.turn.transaction_status


def catalog_from_tools(tools: Iterable[Any]) -> str:
    """An MCP ``tools/list`` result (JSON text) from ``mcp.types.Tool`` objects or dicts."""
    out = []
    for tool in tools:
        if hasattr(tool, "model_dump"):
            out.append(tool.model_dump(by_alias=True, exclude_none=True, mode="json"))
        else:
            out.append(dict(tool))
    return json.dumps({"tools": out}, ensure_ascii=False)


async def _listed_names(session: ToolSession) -> list[str]:
    """Every tool name a server lists, across ``tools/list`` pages."""
    names: list[str] = []
    listed = await session.list_tools()
    for _ in range(1000):  # a server that pages forever is cut off
        names.extend(t.name if hasattr(t, "name") else t["name"] for t in getattr(listed, "tools", listed))
        cursor = getattr(listed, "next_cursor", None) or getattr(listed, "nextCursor", None)
        if not cursor:
            return names
        from mcp.types import PaginatedRequestParams

        try:
            listed = await session.list_tools(params=PaginatedRequestParams(cursor=cursor))  # type: ignore[call-arg]
        except TypeError:  # an mcp 1.x before `params`
            listed = await session.list_tools(cursor=cursor)  # type: ignore[call-arg]
    raise LookupError("a server's tools/list did not end")


class McpToolRouter:
    """Runs turns for one route: its allowlist (``mcp_tools``), scopes, surface."""

    def __init__(
        self,
        rules: RuleSet,
        sessions: ToolSession | Sequence[ToolSession] | Mapping[str, ToolSession],
        *,
        allowed_tools: Sequence[str] | None = None,
        scopes: Sequence[str] | None = None,
        surface: Surface = "confirming",
    ) -> None:
        self.rules = rules
        self.context = Context(surface=surface, scopes=scopes, allowed_tools=allowed_tools)
        self._by_tool: dict[str, ToolSession] | None = None
        self._twice: set[str] = set()
        # Servers found by listing are listed again for each turn that runs
        # calls: a tool added later, or a name a second server starts to
        # offer (then run on neither), is seen by the next turn.
        self._listed = not isinstance(sessions, Mapping)
        if isinstance(sessions, Mapping):
            self._by_tool = dict(sessions)  # tool name -> session
            self._sessions: list[ToolSession] = list(dict.fromkeys(sessions.values()))
        elif isinstance(sessions, Sequence):
            self._sessions = list(sessions)
        else:
            self._sessions = [sessions]

    @classmethod
    def from_env(
        cls,
        catalog: str | os.PathLike[str],
        sessions: ToolSession | Sequence[ToolSession] | Mapping[str, ToolSession],
        *,
        env: Mapping[str, str] | None = None,
        **route: Any,
    ) -> McpToolRouter:
        """The seed framework's set-up: the catalog (``tools.yaml``) and, when
        ``TOOL_POLICIES_PATH`` is set, the policy file; without it, legacy rules."""
        return cls(RuleSet.from_env(catalog, env=env), sessions, **route)

    async def _session_for(self, name: str) -> ToolSession:
        """The one server on this route that lists ``name``. Raises
        ``LookupError`` when none does, or when two do: the rules describe one
        tool by that name, and running another server's would run a tool no
        one reviewed (name the server in a ``{tool: session}`` map)."""
        if self._by_tool is None:
            index: dict[str, ToolSession] = {}
            twice: set[str] = set()
            for session in self._sessions:
                try:
                    names = await _listed_names(session)
                except Exception as e:
                    # A server that cannot list might list this name too: no
                    # call runs on a guess (a map names servers for certain);
                    # it is asked again next time.
                    raise LookupError(
                        f"a server on this route could not list its tools ({e}); map `{name}` to one"
                    ) from e
                for listed in names:
                    if listed in index and index[listed] is not session:
                        twice.add(listed)
                    index.setdefault(listed, session)
            self._by_tool, self._twice = index, twice
        else:
            index, twice = self._by_tool, self._twice
        if name in twice:
            raise LookupError(f"more than one MCP server on this route offers `{name}`: map it to one")
        session = index.get(name)
        if session is None:
            raise LookupError(f"no MCP server on this route offers `{name}`")
        return session

    def plan(
        self,
        state: Mapping[str, Any] | str | None,
        calls: Iterable[Mapping[str, Any] | ToolCall] = (),
        *,
        user_confirmed: bool | str | None = None,
    ) -> TurnState:
        """The turn's decisions without running anything."""
        return self.rules.turn(state or None, calls, user_confirmed=user_confirmed, context=self.context)

    async def run_turn(
        self,
        state: Mapping[str, Any] | str | None,
        calls: Iterable[Mapping[str, Any] | ToolCall] = (),
        *,
        user_confirmed: bool | str | None = None,
    ) -> TurnOutcome:
        """One turn: decide with the engine, then run exactly what it lists in
        ``execute`` (in order), each on the MCP server that offers the tool.

        The new state comes back after the calls ran. A host that must not run
        a confirmed call twice if it is interrupted in between saves the state
        first: ``turn = router.plan(...)``, save ``turn``, then
        ``await router.execute(turn)``. The engine keeps no state: two turns
        started from the same saved state (a double-clicked "confirm", a
        retried request) both run the confirmed call, so replace the saved
        state compare-and-set (on the state read, or its ``pending_digest``)
        before executing."""
        return await self.execute(self.plan(state, calls, user_confirmed=user_confirmed))

    async def execute(self, turn: TurnState) -> TurnOutcome:
        """Runs exactly what a planned turn lists in ``execute``, in order."""
        executed: list[ExecutedCall] = []
        if self._listed and turn.execute:
            self._by_tool = None
        for call in turn.execute:
            try:
                session = await self._session_for(call.name)
            except LookupError as e:
                executed.append(ExecutedCall(call, error=e))
                continue
            try:
                result = await session.call_tool(call.name, dict(call.arguments))
            except Exception as e:  # a server that is down must not take the agent with it
                executed.append(ExecutedCall(call, error=e))
                continue
            executed.append(ExecutedCall(call, result=result))
        return TurnOutcome(turn=turn, executed=tuple(executed))
