"""The RPCs as plain functions of a request, called by the servicer, the batch and tests.

Each returns its encoded response or raises a refusal (errors.Refusal, or the engine's
RuleError, which servicer.respond turns into one), and notes in the call's Facts the seq and
seat it read; nothing here knows about gRPC contexts, so the servicer, the batch and tests call
exactly the same code.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from time import perf_counter

from basra.v1 import rules_pb2 as pb
from google.protobuf.message import DecodeError

import engine
from engine import Move, RuleError, State, bot
from engine.facts import MAX_SEED_BYTES
from engine.rng import commitment
from engine.view import information_set
from service import errors, reading, writing
from service.config import Config
from service.deadlines import SearchClock
from service.enums import ENGINE_BOT_LEVEL
from service.errors import ServiceReason
from service.outcomes import Facts
from wire.actions import action_from_proto
from wire.signing import Keyring

DRAWN_SEED_BYTES = 32


def _no_observation(seconds: float) -> None:
    """Default plan-timing observer: record nothing."""


def _no_suggestion_observation(suggestion: bot.Suggestion, seconds: float) -> None:
    """Default SuggestMove observer: record nothing."""


def _no_seal_observation(key_id: str) -> None:
    """Default observer of the seals of states received: record nothing."""


def _draw_seed() -> bytes:
    """Draw a fresh random seed for a match whose caller sent none."""
    return secrets.token_bytes(DRAWN_SEED_BYTES)


@dataclass(frozen=True, slots=True)
class Limits:
    """Bounds on the work one call may cause."""

    plan_work_limit: int
    max_replay_actions: int
    max_response_bytes: int | None
    """Largest response to send (None: no bound of the handlers' own)."""
    bot_level: bot.Level
    """SuggestMove's level when a request leaves it unspecified."""
    bot_max_budget: bot.Budget
    """The most work one SuggestMove may ask for; the default budget is capped by it."""

    @classmethod
    def of(cls, config: Config) -> Limits:
        """The limits a server with this configuration applies."""
        return cls(
            config.plan_work_limit,
            config.max_replay_actions,
            config.max_message_bytes,
            bot.Level(config.bot_level.upper()),
            bot.Budget(config.bot_max_deals, config.bot_max_nodes),
        )


@dataclass(frozen=True, slots=True)
class Handlers:
    """The six RPCs with their limits, observers, a seed source and signing keys.

    Each RPC takes its request message and the call's Facts, and returns the encoded response.
    """

    limits: Limits = field(default_factory=lambda: Limits.of(Config()))
    observe_plan_seconds: Callable[[float], None] = _no_observation
    observe_suggestion: Callable[[bot.Suggestion, float], None] = _no_suggestion_observation
    """Called with every suggestion and the seconds it took (metrics)."""
    draw_seed: Callable[[], bytes] = _draw_seed
    keyring: Keyring | None = None
    """Signing keys: when set, states go out sealed and must come back sealed."""
    accept_unsigned: bool = False
    """With keys, also take states that come unsigned (the migration window of turning
    signing on or off); a sealed state must still carry a valid seal."""
    observe_seal: Callable[[str], None] = _no_seal_observation
    """With keys, called for each state taken with the id of the key that sealed it, "" for an
    unsigned one taken in the window (metrics: when the old form stops coming, the next step of
    a migration or a key rotation is safe)."""
    search_clock: SearchClock | None = None
    """The running estimate of a search's time: SuggestMove refuses a search that the time
    its caller has left cannot cover (None: never)."""

    def new_match(self, request: pb.NewMatchRequest, facts: Facts) -> bytes:
        """Start a match from the given seed (or a drawn one) and labels."""
        labels = _labels(request.labels)
        seed = request.seed or self.draw_seed()
        state, events = engine.new_match(seed, labels)
        facts.seq = state.seq
        return self._sized(self._result(state, events))

    def apply(self, request: pb.ApplyRequest, facts: Facts) -> bytes:
        """Check the state and the expected seq, then apply the action."""
        if request.action.HasField("seat"):
            facts.seat = request.action.seat
        state = self._checked_state(request, facts)
        if not request.HasField("action"):
            raise errors.refusal(
                engine.Reason.INVALID_ACTION, "The request carries no action.", field="action"
            )
        if request.HasField("expected_seq") and request.expected_seq != state.seq:
            raise errors.refusal(
                ServiceReason.SEQ_MISMATCH,
                f"The state is at seq {state.seq}, not at the expected seq {request.expected_seq}.",
                seq=state.seq,
                expected_seq=request.expected_seq,
            )
        action = action_from_proto(request.action)
        limit = self.limits.plan_work_limit
        after, events = engine.apply(state, action, work_limit=limit, check=False)
        return self._sized(self._result(after, events))

    def legal_moves(self, request: pb.LegalMovesRequest, facts: Facts) -> bytes:
        """List the legal moves of the seat to move."""
        state = self._checked_state(request, facts)
        moves = self._moves(state)
        return self._sized(writing.legal_moves_response_bytes(state.to_move, moves))

    def player_view(self, request: pb.PlayerViewRequest, facts: Facts) -> bytes:
        """Return what one seat may see of the state, or (spectator) what anybody may see."""
        if request.HasField("seat"):
            facts.seat = request.seat
        state = self._checked_state(request, facts)
        if request.spectator:
            if request.HasField("seat"):
                raise errors.refusal(
                    engine.Reason.INVALID_SEAT,
                    "A request for the public view names no seat.",
                    seat=request.seat,
                )
            return self._sized(writing.public_view_response_bytes(engine.public_view(state)))
        if not request.HasField("seat"):
            raise errors.refusal(
                engine.Reason.INVALID_SEAT,
                "The request names no seat (seats are 0 and 1) and does not ask for the public "
                "view (spectator).",
            )
        limit = self.limits.plan_work_limit
        view = engine.seat_view(state, request.seat, limit, self._timed_plans)
        return self._sized(writing.player_view_response_bytes(view))

    def replay(self, request: pb.ReplayRequest, facts: Facts) -> bytes:
        """Rebuild a match from its seed and actions; a refused action is reported, not raised."""
        count, limit = len(request.actions), self.limits.max_replay_actions
        if count > limit:
            raise errors.refusal(
                ServiceReason.TOO_MANY_ACTIONS,
                f"A replay may carry at most {limit} actions, not {count}.",
                actions=count,
                max_actions=limit,
            )
        labels = _labels(request.labels)
        actions: list[engine.Action] = []
        unreadable: RuleError | None = None
        for message in request.actions:
            try:
                actions.append(action_from_proto(message))
            except RuleError as error:
                unreadable = error
                break
        work = self.limits.plan_work_limit
        result = engine.replay(request.seed, actions, labels, work)
        index, refused = result.refused_index, result.error
        if index is None and unreadable is not None:
            index, refused = len(actions), unreadable
        final = result.state
        facts.seq = final.seq
        state = writing.state_fields(final)
        refusal = None
        if refused is not None:
            as_refusal = errors.from_rule_error(refused)
            refusal = writing.refusal_fields(
                as_refusal.reason, as_refusal.message, as_refusal.metadata
            )
        response = writing.replay_response_bytes(
            state,
            result.events,
            writing.moves_fields(final.to_move, self._moves(final)),
            refused_index=index,
            refusal=refusal,
            signed_state=self._seal(state),
        )
        return self._sized(response)

    def suggest_move(
        self, request: pb.SuggestMoveRequest, facts: Facts, seconds_left: float | None = None
    ) -> bytes:
        """Suggest an action for the seat to move, from that seat's information set alone;
        refuse up front a search that `seconds_left` (the caller's time) cannot cover."""
        if request.HasField("seat"):
            facts.seat = request.seat
        state = self._checked_state(request, facts)
        if not request.HasField("seat"):
            raise errors.refusal(
                engine.Reason.INVALID_SEAT, "The request names no seat; seats are 0 and 1."
            )
        level = self._level(request.level)
        if len(request.bot_seed) > MAX_SEED_BYTES:
            raise errors.refusal(
                engine.Reason.INVALID_SEED,
                f"A bot seed has at most {MAX_SEED_BYTES} bytes, not {len(request.bot_seed)}.",
                length=len(request.bot_seed),
            )
        budget = self._budget(request)
        info = information_set(state, request.seat)
        clock = self.search_clock
        if clock is not None:  # after every check of the request: its refusal comes first
            too_short = clock.refusal(level, budget, seconds_left)
            if too_short is not None:
                raise too_short
        started = perf_counter()
        suggestion = bot.suggest(info, level, request.bot_seed, budget, self.limits.plan_work_limit)
        seconds = perf_counter() - started
        self.observe_suggestion(suggestion, seconds)
        if clock is not None:
            clock.observe(level, budget, seconds)
        return self._sized(writing.suggestion_bytes(suggestion))

    def _sized(self, response: bytes) -> bytes:
        """The response, refused if larger than the configured maximum (gRPC would end it bare)."""
        limit = self.limits.max_response_bytes
        size = len(response)
        if limit is not None and size > limit:
            raise errors.refusal(
                ServiceReason.RESPONSE_TOO_LARGE,
                f"The response would have {size} bytes; this server sends at most {limit}.",
                size=size,
                max_bytes=limit,
            )
        return response

    def _level(self, value: int) -> bot.Level:
        """The engine level of a request's BotLevel (UNSPECIFIED: the configured default)."""
        if value == pb.BOT_LEVEL_UNSPECIFIED:
            return self.limits.bot_level
        level = ENGINE_BOT_LEVEL.get(value)
        if level is None:
            raise errors.refusal(
                ServiceReason.INVALID_LEVEL,
                f"{value} is not a BotLevel; use RANDOM, GREEDY, STRONG or leave it unset.",
                level=value,
            )
        return level

    def _budget(self, request: pb.SuggestMoveRequest) -> bot.Budget:
        """The request's budget, a field left 0 taking the default; refused above the cap."""
        cap = self.limits.bot_max_budget
        default = bot.Budget(
            min(bot.DEFAULT_BUDGET.deals, cap.deals), min(bot.DEFAULT_BUDGET.nodes, cap.nodes)
        )
        asked = request.budget
        budget = bot.Budget(asked.deals or default.deals, asked.nodes or default.nodes)
        if budget.deals > cap.deals or budget.nodes > cap.nodes:
            raise errors.refusal(
                ServiceReason.BUDGET_TOO_LARGE,
                f"This server allows at most {cap.deals} deals and {cap.nodes} nodes per "
                f"suggestion, not {budget.deals} and {budget.nodes}.",
                deals=budget.deals,
                nodes=budget.nodes,
                max_deals=cap.deals,
                max_nodes=cap.nodes,
            )
        return budget

    def _checked_state(
        self,
        request: pb.ApplyRequest
        | pb.LegalMovesRequest
        | pb.PlayerViewRequest
        | pb.SuggestMoveRequest,
        facts: Facts,
    ) -> State:
        """Return the request's state once its seal (if signing) and the engine accept it."""
        message = self._state_message(request)
        state = reading.state_from_proto(message)
        facts.seq = state.seq
        engine.check_state(state)
        return state

    def _state_message(
        self,
        request: pb.ApplyRequest
        | pb.LegalMovesRequest
        | pb.PlayerViewRequest
        | pb.SuggestMoveRequest,
    ) -> pb.State:
        """The state message of a request: its plain state, or its sealed one once checked."""
        plain, sealed = request.HasField("state"), request.HasField("signed_state")
        if self.keyring is not None:
            # Checked before anything reads the state: a bad seal never reaches the engine.
            if self.accept_unsigned and _unsigned(request, plain, sealed):
                self.observe_seal("")
            elif plain or not sealed:
                raise errors.refusal(
                    ServiceReason.BAD_SIGNATURE,
                    "This server signs states: send the signed_state it returned, unchanged, "
                    "and no plain state.",
                    field="signed_state",
                )
            else:
                seal = request.signed_state
                if not self.keyring.verify(seal.key_id, seal.state, seal.signature):
                    raise errors.refusal(
                        ServiceReason.BAD_SIGNATURE,
                        "The signed state does not carry a valid signature of a current key.",
                        key_id=seal.key_id[:64],
                    )
                self.observe_seal(seal.key_id)
        elif plain and sealed:
            raise errors.refusal(
                engine.Reason.INVALID_STATE,
                "The request carries both a state and a signed state; send one.",
                field="signed_state",
            )
        if sealed:
            try:
                return pb.State.FromString(request.signed_state.state)
            except DecodeError:
                raise errors.refusal(
                    engine.Reason.INVALID_STATE,
                    "The signed state's bytes are not a State message.",
                    field="signed_state",
                ) from None
        if not plain:
            raise errors.refusal(
                engine.Reason.INVALID_STATE, "The request carries no state.", field="state"
            )
        return request.state

    def _seal(self, state: writing.Fields) -> writing.Fields | None:
        """The signed form of a returned state (its values), when signing."""
        if self.keyring is None:
            return None
        encoded = writing.state_bytes(state)
        key_id, signature = self.keyring.sign(encoded)
        return writing.signed_state_fields(encoded, key_id, signature)

    def _moves(self, state: State) -> tuple[Move, ...]:
        """Legal moves of the seat to move, timing the plan generation of each card."""
        return engine.legal_moves(state, self.limits.plan_work_limit, self._timed_plans)

    def _timed_plans(self, card: int, floor: int, limit: int) -> tuple[engine.Plan, ...]:
        """engine.plans_for, observed: one plan-timing observation per card."""
        started = perf_counter()
        plans = engine.plans_for(card, floor, limit)
        self.observe_plan_seconds(perf_counter() - started)
        return plans

    def _result(self, state: State, events: tuple[engine.Event, ...]) -> bytes:
        """The response of NewMatch or Apply: state, events as everyone and each seat sees them."""
        fields = writing.state_fields(state)
        return writing.match_response_bytes(
            fields,
            events,
            writing.moves_bytes(state.to_move, self._moves(state)),
            commitment(state.seed),
            self._seal(fields),
        )


def _unsigned(
    request: pb.ApplyRequest | pb.LegalMovesRequest | pb.PlayerViewRequest | pb.SuggestMoveRequest,
    plain: bool,
    sealed: bool,
) -> bool:
    """Whether a request carries its state unsigned, and only so: as a plain state, or in a
    SignedState with neither key id nor signature (what a client that wraps every state sends
    for one that came unsigned)."""
    if plain:
        return not sealed
    seal = request.signed_state
    return sealed and not seal.key_id and not seal.signature


def _labels(labels: Iterable[str]) -> tuple[str, str]:
    """Return the two labels of a request, refusing more than two."""
    given = list(labels)
    if len(given) > 2:
        raise errors.refusal(
            ServiceReason.TOO_MANY_LABELS,
            f"A match has two players, so at most two labels, not {len(given)}.",
            labels=len(given),
        )
    return reading.labels_from_proto(given)
