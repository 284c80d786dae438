package rules_test

import (
	"bytes"
	"context"
	"errors"
	"testing"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	basrav1 "example.com/basra-rules/lobby/pb/basra/v1"
	"example.com/basra-rules/lobby/rules"
)

// maxPlays bounds a match: far more plays than any match takes (48 a hand).
const maxPlays = 48 * 40

// playToTheEnd has the bot play both seats (seat 0 STRONG, seat 1 GREEDY) until the match is
// over, checking each answer, and returns the match.
func playToTheEnd(t *testing.T, client *rules.Client, seed string, signed bool) *rules.Match {
	t.Helper()
	ctx := context.Background()
	match, first, err := client.Start(ctx, []byte(seed), "go-strong", "go-greedy")
	if err != nil {
		t.Fatal(err)
	}
	if got := first.GetSignedState() != nil; got != signed {
		t.Fatalf("NewMatch: signed state present %v, want %v", got, signed)
	}
	levels := [2]basrav1.BotLevel{basrav1.BotLevel_BOT_LEVEL_STRONG, basrav1.BotLevel_BOT_LEVEL_GREEDY}
	for plays := 0; match.State().GetStatus() == basrav1.Status_STATUS_IN_PROGRESS; plays++ {
		if plays == maxPlays {
			t.Fatalf("the match is not over after %d plays", plays)
		}
		before := match.State()
		seat := before.GetToMove()
		if plays%97 == 0 {
			// What the seat to move sees: its own hand, and its legal moves.
			view, err := match.View(ctx, seat)
			if err != nil {
				t.Fatal(err)
			}
			if !equalCards(view.GetHand(), before.GetSeats()[seat].GetHand()) || view.GetLegalMoves() == nil {
				t.Fatalf("seat %d's view %v does not show its hand and moves", seat, view)
			}
		}
		suggestion, answer, err := match.Autoplay(ctx, levels[seat])
		if err != nil {
			t.Fatalf("play %d: %v", plays, err)
		}
		if suggestion.GetLevel() != levels[seat] || suggestion.GetAction().GetSeat() != seat {
			t.Fatalf("play %d: suggestion %v is not seat %d's at %v", plays, suggestion, seat, levels[seat])
		}
		if answer.GetState().GetSeq() != before.GetSeq()+1 || match.State() != answer.GetState() {
			t.Fatalf("play %d: seq %d after %d, or the answer was not stored", plays, answer.GetState().GetSeq(), before.GetSeq())
		}
		if signed && match.Signed() != answer.GetSignedState() {
			t.Fatalf("play %d: the signed state kept is not the answer's", plays)
		}
	}
	return match
}

func equalCards(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// checkReplay replays the match's record and checks it ends in the same state, winner
// included.
func checkReplay(t *testing.T, client *rules.Client, match *rules.Match) {
	t.Helper()
	final := match.State()
	if final.Winner == nil {
		t.Fatalf("the match is over but names no winner: %v", final)
	}
	replay, err := client.Replay(context.Background(), match.Record())
	if err != nil {
		t.Fatal(err)
	}
	if replay.RefusedIndex != nil {
		t.Fatalf("Replay refused action %d: %v", replay.GetRefusedIndex(), replay.GetRefusal())
	}
	if replay.GetState().GetWinner() != final.GetWinner() || !proto.Equal(replay.GetState(), final) {
		t.Fatalf("Replay ends with winner %d, the match with %d", replay.GetState().GetWinner(), final.GetWinner())
	}
	t.Logf("seat %d won %v after %d plays", final.GetWinner(), totals(final), final.GetSeq())
}

func totals(state *basrav1.State) [2]uint32 {
	return [2]uint32{state.GetSeats()[0].GetTotal(), state.GetSeats()[1].GetTotal()}
}

func TestWholeMatchAgainstTheBot(t *testing.T) {
	client := need(t, "plain").client(t)
	match := playToTheEnd(t, client, "go-whole-match", false)
	checkReplay(t, client, match)
}

func TestWholeMatchSignedOverMutualTLS(t *testing.T) {
	client := need(t, "trusted").client(t)
	match := playToTheEnd(t, client, "go-signed-match", true)
	// The signed bytes are the state the lobby reads, and went back as they came: the server
	// verified every one of them.
	var sealed basrav1.State
	if err := proto.Unmarshal(match.Signed().GetState(), &sealed); err != nil || !proto.Equal(&sealed, match.State()) {
		t.Fatalf("the signed state's bytes are not the last state (%v)", err)
	}
	checkReplay(t, client, match)
}

func TestTheTrustedServerTakesMutualTLSOnly(t *testing.T) {
	s := need(t, "trusted")
	withoutCertificate := s.options
	withoutCertificate.CertFile, withoutCertificate.KeyFile = "", ""
	for name, options := range map[string]rules.Options{"plaintext": {}, "TLS without a client certificate": withoutCertificate} {
		client, err := rules.Dial(s.address, options)
		if err != nil {
			t.Fatal(err)
		}
		defer client.Close()
		if _, err := client.Serving(context.Background()); codeOf(err) != codes.Unavailable {
			t.Errorf("%s: a health check of the mutual TLS server gave %v, want Unavailable", name, err)
		}
	}
}

func codeOf(err error) codes.Code {
	var refusal *rules.Refusal
	if errors.As(err, &refusal) {
		return refusal.Code
	}
	return codes.OK
}

// refusal is err as a *rules.Refusal with the code and reason wanted.
func refusal(t *testing.T, err error, code codes.Code, reason string) *rules.Refusal {
	t.Helper()
	var r *rules.Refusal
	if !errors.As(err, &r) || r.Code != code || r.Reason != reason {
		t.Fatalf("got %v, want %v %s", err, code, reason)
	}
	if r.Message == "" {
		t.Fatalf("%s has no message", reason)
	}
	return r
}

// started is a new match from seed on the named server, with its client, its first answer and
// the first legal move of that answer.
func started(t *testing.T, name, seed string) (*rules.Client, *rules.Match, *basrav1.NewMatchResponse, *basrav1.Action) {
	t.Helper()
	client := need(t, name).client(t)
	match, first, err := client.Start(context.Background(), []byte(seed))
	if err != nil {
		t.Fatal(err)
	}
	legal := first.GetLegalMoves()
	return client, match, first, &basrav1.Action{Seat: legal.Seat, Card: legal.GetMoves()[0].GetCard()}
}

func TestAStaleViewIsRefusedWithSeqMismatch(t *testing.T) {
	_, match, first, stale := started(t, "plain", "go-stale-view")
	ctx := context.Background()
	if _, _, err := match.Autoplay(ctx, basrav1.BotLevel_BOT_LEVEL_GREEDY); err != nil {
		t.Fatal(err)
	}
	// A second click on the first view: its seq (0) is stale, the match is at 1.
	_, err := match.Play(ctx, stale, first.GetState().GetSeq())
	r := refusal(t, err, codes.Aborted, "SEQ_MISMATCH")
	if r.Metadata["seq"] != "1" || r.Metadata["expectedSeq"] != "0" {
		t.Fatalf("SEQ_MISMATCH metadata %v, want seq 1 and expectedSeq 0", r.Metadata)
	}
	if match.State().GetSeq() != 1 {
		t.Fatalf("a refused move changed the match: seq %d", match.State().GetSeq())
	}
}

func TestATamperedSignedStateIsRefusedWithBadSignature(t *testing.T) {
	client, match, _, action := started(t, "trusted", "go-tampered")
	ctx := context.Background()
	signed := match.Signed()
	if signed == nil || signed.GetKeyId() != signingKeyID {
		t.Fatalf("the trusted server's state is not signed with %s: %v", signingKeyID, signed)
	}

	// One bit of the state's bytes changed, the seal kept: a state of the caller's making.
	tampered := proto.Clone(signed).(*basrav1.SignedState)
	tampered.State = bytes.Clone(signed.GetState())
	tampered.State[len(tampered.State)-1] ^= 1
	_, err := client.Apply(ctx, &basrav1.ApplyRequest{SignedState: tampered, Action: action, ExpectedSeq: proto.Uint32(0)})
	if r := refusal(t, err, codes.Unauthenticated, "BAD_SIGNATURE"); r.Metadata["keyId"] != signingKeyID {
		t.Fatalf("BAD_SIGNATURE metadata %v, want keyId %s", r.Metadata, signingKeyID)
	}

	// The plain state alone, which a signing server never takes.
	_, err = client.Apply(ctx, &basrav1.ApplyRequest{State: match.State(), Action: action, ExpectedSeq: proto.Uint32(0)})
	if r := refusal(t, err, codes.Unauthenticated, "BAD_SIGNATURE"); r.Metadata["field"] == "" {
		t.Fatalf("BAD_SIGNATURE metadata %v names no field", r.Metadata)
	}

	// The state as it came is still good: nothing was stored by the refusals.
	if _, err := match.Play(ctx, action, 0); err != nil {
		t.Fatal(err)
	}
}
