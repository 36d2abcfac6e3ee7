"""`RuleSet`: a loaded policy + catalog, deciding calls through the component."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import wasmtime

from . import _runtime
from ._calljson import call_json, engine_json
from ._faults import FAULTS, MAX_INPUT_BYTES
from ._types import (
    Confirmation,
    ContextLike,
    Decision,
    Finding,
    Outcome,
    Problem,
    ToolCall,
    TurnState,
    context_json,
    fault_outcome,
)

POLICY_ENV = "TOOL_POLICIES_PATH"


class ToolgateError(Exception):
    """Base error. ``code`` is stable (``POLICY_UNKNOWN_KEY``, ``ENGINE_TRAP``, ...)."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"{message} ({code})")
        self.code = code
        self.message = message


class ProblemError(ToolgateError):
    """The component refused an input; ``problem`` says where and why."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.code, problem.message)
        self.problem = problem

    @property
    def origin(self) -> str:
        return self.problem.origin

    @property
    def line(self) -> int:
        return self.problem.line

    @property
    def column(self) -> int:
        return self.problem.column


class LoadError(ProblemError):
    """The policy or catalog could not be loaded (``origin`` says which)."""


class EngineFault(ToolgateError):
    """The component could not answer (trap, compute budget, size limit, wrong contract).

    ``evaluate`` and ``decide`` never raise this: they return the fault's deny
    decision (``decide``: with its blocked result)."""


def _problem(record: Any) -> Problem:
    return Problem(
        code=record.code,
        message=record.message,
        origin=_runtime.enum_name(_runtime.ORIGINS, record.origin),
        path=record.path,
        line=record.line,
        column=record.column,
    )


def _call_bytes(call: Any, arguments: Mapping[str, Any] | None) -> bytes:
    if isinstance(call, (bytes, bytearray, memoryview)):
        return bytes(call)
    if isinstance(call, str):
        if arguments is None and call.lstrip().startswith("{"):
            return _utf8(call)
        return _utf8(call_json(call, dict(arguments or {})))
    if isinstance(call, ToolCall):
        return _utf8(engine_json(call.to_dict()))
    return _utf8(engine_json(dict(call)))


def _utf8(text: str) -> bytes:
    # A lone surrogate becomes invalid UTF-8 bytes: the engine answers
    # BAD_REQUEST (SPEC §7: a clear error, never a crash).
    return text.encode("utf-8", "surrogatepass")


#: What is sent for a context text holding a lone surrogate, which UTF-8
#: cannot carry: a JSON text the engine always refuses (INVALID_CONTEXT), as
#: the npm package sends. An escape in the surrogate's place could complete
#: a backslash before it into valid JSON, which would then be decided.
UNSENDABLE_CONTEXT = b'"\\ud800"'


def _context_bytes(context: str) -> bytes:
    try:
        return context.encode("utf-8")
    except UnicodeEncodeError:
        return UNSENDABLE_CONTEXT


def _too_large(text: str) -> bool:
    # At most 6 bytes per code point are counted (4 for a character, 6 for a
    # lone surrogate as its `\udcXX` escape): encode only when it could
    # matter, counting the larger form.
    return len(text) > MAX_INPUT_BYTES // 6 and len(text.encode("utf-8", "backslashreplace")) > MAX_INPUT_BYTES


class RuleSet:
    """Policy and catalog, loaded once into the component; immutable.

    Thread-safe (calls on one rule set are serialized). A trap poisons only the
    instance: the next call re-instantiates the component and reloads the same
    texts, so service goes on.
    """

    def __init__(
        self,
        *,
        catalog: str,
        policy: str | None = None,
        call_fuel: int = _runtime.DEFAULT_CALL_FUEL,
        load_fuel: int | None = None,
        memory_limit: int | None = _runtime.DEFAULT_MEMORY_LIMIT,
        prepared: str | os.PathLike[str] | None = None,
    ) -> None:
        # ``prepared``: a directory ``toolgate prepare`` wrote; its component
        # (the engine with these texts already loaded when they are the ones
        # it was prepared with) replaces the shipped one. Refused
        # (``COMPONENT_INVALID``) when missing or prepared from another build.
        self._component = None if prepared is None else Path(prepared) / _runtime.PREPARED_COMPONENT_FILE
        # A lone surrogate cannot be written as UTF-8: refused (ValueError).
        self._catalog = _runtime.text_argument(catalog, "the catalog text")
        self._policy = None if policy is None else _runtime.text_argument(policy, "the policy text")
        self.call_fuel = call_fuel
        self.load_fuel = load_fuel
        self.memory_limit = memory_limit
        self._lock = threading.Lock()
        self._inst: _runtime.Instance | None = None
        self._handle: Any = None
        self._revision: str | None = None
        with self._lock:
            self._instantiate()

    # -- construction -------------------------------------------------------

    @classmethod
    def load(cls, *, catalog: str, policy: str | None = None, **options: Any) -> RuleSet:
        """Loads rules from text. ``policy=None`` is legacy behaviour (SPEC §1).

        Raises :class:`LoadError` with the problem's code, line and column."""
        return cls(catalog=catalog, policy=policy, **options)

    @classmethod
    def from_files(
        cls, catalog: str | os.PathLike[str], policy: str | os.PathLike[str] | None = None, **options: Any
    ) -> RuleSet:
        catalog_text = Path(catalog).read_text(encoding="utf-8")
        policy_text = Path(policy).read_text(encoding="utf-8") if policy is not None else None
        return cls(catalog=catalog_text, policy=policy_text, **options)

    @classmethod
    def from_env(
        cls, catalog: str | os.PathLike[str], *, env: Mapping[str, str] | None = None, **options: Any
    ) -> RuleSet:
        """Catalog from ``catalog``; policy from ``TOOL_POLICIES_PATH`` when set
        and non-empty, else legacy behaviour (the seed framework's rule)."""
        environ = os.environ if env is None else env
        policy = environ.get(POLICY_ENV) or None
        return cls.from_files(catalog, policy, **options)

    # -- the instance ---------------------------------------------------------

    def _instantiate(self) -> None:
        runtime = _checked_runtime(self._component)
        try:
            inst = _runtime.Instance(runtime)
        except (wasmtime.WasmtimeError, RuntimeError) as e:
            raise EngineFault("COMPONENT_INVALID", f"the policy component is unusable: {e}") from None
        if self.memory_limit is not None:
            inst.store.set_limits(memory_size=self.memory_limit)
        try:
            version = inst.call("contract-version")
        except _runtime.Trap as trap:
            raise EngineFault(trap.code, f"the policy engine failed on contract-version: {trap.detail}") from None
        if version != _runtime.CONTRACT_VERSION:
            raise EngineFault(
                "CONTRACT_VERSION_MISMATCH",
                f"the component implements toolgate:policy {version}, this package needs {_runtime.CONTRACT_VERSION}",
            )
        try:
            fuel = self.load_fuel
            if fuel is None:
                input_bytes = len(self._catalog) + len(self._policy or "")
                fuel = max(_runtime.DEFAULT_LOAD_FUEL, input_bytes * _runtime.LOAD_FUEL_PER_INPUT_BYTE)
            result = inst.call("[static]rule-set.load", self._policy, self._catalog, fuel=fuel)
        except _runtime.Trap as trap:
            raise EngineFault(trap.code, f"the policy engine failed while loading the rules: {trap.detail}") from None
        if not isinstance(result, _runtime.wc.ResourceAny):
            raise LoadError(_problem(result))
        self._inst = inst
        self._handle = result

    def _inject_trap(self) -> None:
        """Test hook, not API: the next call traps in the component's canonical
        ABI. The rule-set resource is dropped (its destructor runs in the
        guest), so the next call hands the instance a handle it no longer has:
        the component model's trap for an invalid handle. That call gets
        ``ENGINE_TRAP``; the one after re-instantiates, like after any trap."""
        with self._lock:
            if self._inst is not None and not self._inst.poisoned:
                self._handle.drop(self._inst.store)

    def _live(self) -> _runtime.Instance:
        """The instance; a new one after a trap. Raises `_runtime.Trap`
        (never anything else: a fault is a deny, not an exception)."""
        if self._inst is None or self._inst.poisoned:
            self._inst = None
            try:
                self._instantiate()
            except EngineFault as fault:
                raise _runtime.Trap(fault.code, fault.message) from None
            except Exception as e:  # wasmtime's own errors, a missing export
                raise _runtime.Trap("ENGINE_TRAP", f"the policy engine could not be instantiated again: {e}") from None
        assert self._inst is not None
        return self._inst

    def _call(self, name: str, *args: Any) -> Any:
        """Calls a method; re-instantiates after a trap. Raises `_runtime.Trap`."""
        return self._live().call(name, self._handle, *args, fuel=self.call_fuel)

    # -- the contract -------------------------------------------------------

    def evaluate_json(self, call: bytes, context: str = '{"surface":"confirming"}') -> str:
        """The raw contract: call bytes and context JSON in, decision bytes out.
        Never raises for a fault: a fault is its own deny decision."""
        if not isinstance(call, bytes):
            # Any buffer (bytearray, a memoryview of wider items): its bytes,
            # counted as bytes, and one shape for both ways into wasmtime.
            call = memoryview(call).tobytes()
        text = _context_bytes(context)
        if len(call) > MAX_INPUT_BYTES or len(text) > MAX_INPUT_BYTES:
            return FAULTS["INPUT_TOO_LARGE"]
        with self._lock:
            try:
                return self._live().evaluate(self._handle, call, text, self.call_fuel)
            except _runtime.Trap as trap:
                return FAULTS.get(trap.code, FAULTS["ENGINE_TRAP"])

    def evaluate(
        self,
        call: str | bytes | Mapping[str, Any] | ToolCall,
        arguments: Mapping[str, Any] | None = None,
        *,
        context: ContextLike = None,
    ) -> Decision:
        """Decides one ``tools/call``.

        ``call`` is a tool name (with ``arguments``), a ``{"name", "arguments"}``
        mapping, a :class:`ToolCall`, or the call's raw JSON bytes."""
        return Decision.from_json(self.evaluate_json(_call_bytes(call, arguments), context_json(context)))

    def decide(
        self,
        call: str | bytes | Mapping[str, Any] | ToolCall,
        context: ContextLike = None,
        confirmation: Confirmation = "none",
    ) -> Outcome:
        """The call pipeline (docs/spec.md §8): decides one ``tools/call`` given
        how the host obtained its confirmation, and says what to do with it.

        ``call`` is a ``{"name", "arguments"}`` mapping, a :class:`ToolCall`,
        the call's JSON text or raw bytes (a bare tool name: no arguments).
        ``confirmation`` is ``"none"`` (default: the model's ``confirmed`` /
        ``confirmation`` fields never count), ``"argument"`` (the model's
        literal ``confirmed: true`` counts), ``"person"`` (the person accepted
        this very call through the host), ``"invalid"`` (a seal the host could
        not accept) or ``{"seal": {"payload", "caller", "now_ms"}}`` (a seal
        the host opened with its own key; see :meth:`seal_payload`).

        Allowed: forward exactly :attr:`Outcome.forward`. Denied: answer with
        :attr:`Outcome.blocked_result`, or, when there is none
        (``NOT_FOUND``), as the server answers a tool it does not have. The
        host never adds, removes or reads the confirmation fields itself.
        Never raises for a bad call or a failing engine: a fault (trap, compute
        budget, memory cap, input too large) is a deny with its code and the
        blocked result every host gives. Raises ``TypeError`` for a
        ``confirmation`` that is none of the above, ``ValueError`` for a seal
        whose payload or caller holds a lone surrogate."""
        variant = _runtime.confirmation_variant(confirmation)
        return self._decide(_call_bytes(call, None), context_json(context), variant)

    def _decide(self, call: bytes, context: str, variant: Any) -> Outcome:
        sent = _context_bytes(context)
        if len(call) > MAX_INPUT_BYTES or len(sent) > MAX_INPUT_BYTES:
            return fault_outcome("INPUT_TOO_LARGE")
        text = sent.decode("utf-8")
        with self._lock:
            try:
                record = self._call("[method]rule-set.decide", call, text, variant)
            except _runtime.Trap as trap:
                return fault_outcome(trap.code if trap.code in FAULTS else "ENGINE_TRAP")
        try:
            decision_json, forward, blocked, digest = _runtime.outcome_fields(record)
            decision = Decision.from_json(decision_json)
        except (TypeError, ValueError, AttributeError):
            return fault_outcome("ENGINE_TRAP")
        # An allow must come with the call to forward, a deny without; anything
        # else from the engine is a fault, and faults deny (as host-rs).
        if decision.ok != (forward is not None) or decision.code == "ENGINE_TRAP":
            return fault_outcome("ENGINE_TRAP")
        return Outcome(decision, forward, blocked, digest)

    def seal_payload(
        self,
        call: str | bytes | Mapping[str, Any] | ToolCall,
        caller: str,
        id: str,
        expires_ms: int,
    ) -> str:
        """The payload a host seals (encrypts or MACs with its own key) to carry
        a pending confirmation of ``call`` through the client (docs/spec.md
        §8): contract version, tool, call digest, policy revision, caller, id
        and expiry. ``caller``: the authenticated caller's subject, or ``""``;
        ``id``: a fresh id, 16 to 128 characters of ``A-Z a-z 0-9 _ -``;
        ``expires_ms``: the expiry, milliseconds since the Unix epoch.

        Raises :class:`ProblemError` (``CALL_INVALID_VALUE``: an unreadable
        call, a tool these rules do not have, non-object arguments, a bad id),
        :class:`EngineFault` (``INPUT_TOO_LARGE``, ``ENGINE_TRAP``, ...)."""
        data = _call_bytes(call, None)
        caller = _runtime.text_argument(caller, "caller")
        id = _runtime.text_argument(id, "id")
        expires = _runtime.u64(expires_ms, "expires_ms")
        if len(data) > MAX_INPUT_BYTES or _too_large(caller) or _too_large(id):
            raise EngineFault("INPUT_TOO_LARGE", "the call, caller or id is larger than this host accepts")
        with self._lock:
            return self._checked("[method]rule-set.seal-payload", data, caller, id, expires)

    def list_exposable_json(self, context: str = '{"surface":"confirming"}') -> str:
        sent = _context_bytes(context)
        if len(sent) > MAX_INPUT_BYTES:
            raise EngineFault("INPUT_TOO_LARGE", "the context is larger than this host accepts")
        with self._lock:
            result = self._checked("[method]rule-set.list-exposable", sent.decode("utf-8"))
        return result

    def list_exposable(self, context: ContextLike = None) -> list[dict[str, Any]]:
        """The ``tools/list`` entries this context may see (sorted by name)."""
        return json.loads(self.list_exposable_json(context_json(context)))["tools"]  # type: ignore[no-any-return]

    def turn_json(self, state: str, input: str) -> str:
        # UTF-8 cannot carry a lone surrogate: refused (ValueError), as the
        # npm package refuses it, never decided on a stand-in.
        state = _runtime.text_argument(state, "the turn state")
        input = _runtime.text_argument(input, "the turn input")
        if _too_large(state) or _too_large(input):
            raise EngineFault("INPUT_TOO_LARGE", "the turn state or input is larger than this host accepts")
        with self._lock:
            return self._checked("[method]rule-set.turn", state, input)

    def turn(
        self,
        state: Mapping[str, Any] | str | TurnState | None,
        calls: Iterable[Mapping[str, Any] | ToolCall] = (),
        *,
        user_confirmed: bool | str | None = None,
        context: ContextLike = None,
    ) -> TurnState:
        """One turn of the transactional runtime (SPEC §6).

        ``state`` is the previous turn's state (a dict, its JSON, a
        :class:`TurnState`) or ``None`` for a new conversation.
        ``user_confirmed`` is ``True``, ``False``, ``None`` or, best, the
        ``pending_digest`` of the state the person answered: that yes
        runs only the call they were shown."""
        if state is None:
            state_text = ""
        elif isinstance(state, TurnState):
            state_text = state.json
        elif isinstance(state, str):
            state_text = state
        else:
            state_text = engine_json(dict(state))
        # Written as calls are (_calljson), the context's text as given: the
        # engine reads and judges all of it.
        calls_text = engine_json([c.to_dict() if isinstance(c, ToolCall) else dict(c) for c in calls])
        payload = (
            f'{{"context":{context_json(context)},"calls":{calls_text},"user_confirmed":{engine_json(user_confirmed)}}}'
        )
        return TurnState.from_json(self.turn_json(state_text, payload))

    def _checked(self, name: str, *args: Any) -> str:
        try:
            result = self._call(name, *args)
        except _runtime.Trap as trap:
            raise EngineFault(trap.code, f"the policy engine could not answer: {trap.detail}") from None
        if isinstance(result, str):
            return result
        raise ProblemError(_problem(result))

    @property
    def revision(self) -> str:
        """The ``policy_revision`` every decision carries."""
        if self._revision is None:
            with self._lock:
                self._revision = self._plain("[method]rule-set.revision")
        return self._revision

    @property
    def findings(self) -> list[Finding]:
        """Lints on the loaded rules."""
        with self._lock:
            records = self._plain("[method]rule-set.findings")
        return [
            Finding(severity=_runtime.enum_name(_runtime.SEVERITIES, r.severity), problem=_problem(r.problem))
            for r in records
        ]

    def _plain(self, name: str, *args: Any) -> Any:
        try:
            return self._call(name, *args)
        except _runtime.Trap as trap:
            raise EngineFault(trap.code, f"the policy engine could not answer: {trap.detail}") from None

    def __repr__(self) -> str:
        policy = "yes" if self._policy is not None else "legacy"
        return f"<mcp_toolgate.RuleSet policy={policy} revision={self._revision or '?'}>"


def _checked_runtime(component: Path | None) -> _runtime.Runtime:
    try:
        return _runtime.runtime(component)
    except _runtime.ComponentRefused as e:
        raise EngineFault("COMPONENT_INVALID", f"the policy component is unusable: {e}") from None


def contract_version() -> str:
    """The component's contract version (``CONTRACT_VERSION`` when it is the one this package speaks)."""
    inst = _runtime.Instance(_checked_runtime(None))
    return inst.call("contract-version")  # type: ignore[no-any-return]
