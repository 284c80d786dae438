"""A basra.v1 Action read into an engine Action: as the server reads a call's, and
`basra-rules verify` the actions of a match record.

An action's choice is read as sent (a plan id, an explicit capture, a trail or none); a
missing seat, a card code that is not one and a false `trail` are refused with the rule's
reasons, so a record is read exactly as the server would have read its calls.
"""

from __future__ import annotations

from basra.v1 import rules_pb2 as pb

from engine import Action, Reason, RuleError, code, parse_card


def action_from_proto(message_: pb.Action) -> Action:
    """Return the engine action a message describes, refusing a missing seat or a false trail."""
    if not message_.HasField("seat"):
        raise RuleError(Reason.INVALID_SEAT, "The action names no seat; seats are 0 and 1.")
    card = parse_card(message_.card)
    choice = message_.WhichOneof("choice")
    if choice == "plan_id":
        return Action(message_.seat, card, plan_id=message_.plan_id)
    if choice == "capture":
        try:
            capture = tuple(parse_card(t) for t in message_.capture.cards)
        except RuleError as error:
            raise RuleError(
                Reason.INVALID_CARD,
                f"The capture of {code(card)} names '{error.details.get('card', '')}', "
                "which is not a card code.",
                card=code(card),
                capture=error.details.get("card", ""),
            ) from None
        return Action(message_.seat, card, capture=capture)
    if choice == "trail":
        if not message_.trail:
            raise RuleError(
                Reason.INVALID_ACTION,
                "An action that sets trail must set it to true.",
                card=code(card),
            )
        return Action(message_.seat, card, trail=True)
    return Action(message_.seat, card)
