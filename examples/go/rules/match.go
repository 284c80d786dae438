package rules

import (
	"context"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	basrav1 "example.com/basra-rules/lobby/pb/basra/v1"
)

// Match is one match as a lobby keeps it: the state of the last answer (to read: whose turn,
// seq, status; it holds the seed and both hands, so it never reaches a player), and, when the
// service signs, the signed state of that answer, which goes back unchanged. Safe for
// concurrent use: an answer is stored only over the state its call was made on.
type Match struct {
	client  *Client
	mu      sync.Mutex
	state   *basrav1.State
	signed  *basrav1.SignedState
	actions []*basrav1.Action
}

// Start begins a match with seed (empty: the server draws one) and the seats' labels.
func (c *Client) Start(ctx context.Context, seed []byte, labels ...string) (*Match, *basrav1.NewMatchResponse, error) {
	answer, err := c.NewMatch(ctx, &basrav1.NewMatchRequest{Seed: seed, Labels: labels})
	if err != nil {
		return nil, nil, err
	}
	return &Match{client: c, state: answer.GetState(), signed: answer.GetSignedState()}, answer, nil
}

// State is the state of the last answer stored, for the lobby to read.
func (m *Match) State() *basrav1.State {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.state
}

// Signed is the signed state of the last answer stored (nil when the service does not sign).
func (m *Match) Signed() *basrav1.SignedState {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.signed
}

// Record is the match's record, for Replay: its seed, its labels and every action stored.
func (m *Match) Record() *basrav1.ReplayRequest {
	m.mu.Lock()
	defer m.mu.Unlock()
	record := &basrav1.ReplayRequest{Seed: m.state.GetSeed(), Actions: append([]*basrav1.Action(nil), m.actions...)}
	for _, seat := range m.state.GetSeats() {
		record.Labels = append(record.Labels, seat.GetLabel())
	}
	return record
}

// current is the state to read, and what a request carries: the signed state, as it came,
// when the service signs; else the plain state.
func (m *Match) current() (read *basrav1.State, state *basrav1.State, signed *basrav1.SignedState) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.signed != nil {
		return m.state, nil, m.signed
	}
	return m.state, m.state, nil
}

// Play applies action on the view of seq (the seq the player saw), with expected_seq: if the
// match moved on, the service refuses it (SEQ_MISMATCH) instead of applying it to a position
// the player never saw. The answer is stored only if nothing else was stored meanwhile (with a
// database: UPDATE ... WHERE id = ? AND seq = ?).
func (m *Match) Play(ctx context.Context, action *basrav1.Action, seq uint32) (*basrav1.ApplyResponse, error) {
	_, state, signed := m.current()
	answer, err := m.client.Apply(ctx, &basrav1.ApplyRequest{
		State: state, SignedState: signed, Action: action, ExpectedSeq: proto.Uint32(seq),
	})
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.state.GetSeq() != seq {
		// Another action (a turn timer, a second click) was stored first.
		return nil, &Refusal{Code: codes.Aborted, Reason: "SEQ_MISMATCH", Message: "Another action was played first."}
	}
	m.state, m.signed = answer.GetState(), answer.GetSignedState()
	m.actions = append(m.actions, action)
	return answer, nil
}

// Autoplay plays the bot's move for the seat to move at level: SuggestMove from what that
// seat may see, then Play of exactly the suggested action on the seq it was asked on.
func (m *Match) Autoplay(ctx context.Context, level basrav1.BotLevel) (*basrav1.SuggestMoveResponse, *basrav1.ApplyResponse, error) {
	read, state, signed := m.current()
	suggestion, err := m.client.SuggestMove(ctx, &basrav1.SuggestMoveRequest{
		State: state, SignedState: signed, Seat: read.ToMove, Level: level,
	})
	if err != nil {
		return nil, nil, err
	}
	answer, err := m.Play(ctx, suggestion.GetAction(), read.GetSeq())
	return suggestion, answer, err
}

// View is what seat may see of the match: safe to send to that seat's player.
func (m *Match) View(ctx context.Context, seat int32) (*basrav1.PlayerView, error) {
	_, state, signed := m.current()
	answer, err := m.client.PlayerView(ctx, &basrav1.PlayerViewRequest{State: state, SignedState: signed, Seat: proto.Int32(seat)})
	if err != nil {
		return nil, err
	}
	return answer.GetView(), nil
}
