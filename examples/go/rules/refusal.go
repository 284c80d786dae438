package rules

import (
	"errors"
	"fmt"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Refusal is a call the rules service (or gRPC) ended with an error status. Decide on Code
// and Reason; show Message to people.
type Refusal struct {
	// Code is the gRPC status code (codes.FailedPrecondition, codes.Aborted, ...).
	Code codes.Code
	// Reason is the ErrorInfo's stable reason (NOT_YOUR_TURN, SEQ_MISMATCH, BAD_SIGNATURE,
	// ...), or the code's name when gRPC itself ended the call (no ErrorInfo: Unavailable,
	// DeadlineExceeded, ...).
	Reason string
	// Message is the status message: one English sentence.
	Message string
	// Metadata names the values involved (seat, card, seq, expectedSeq, keyId, ...).
	Metadata map[string]string
}

func (r *Refusal) Error() string {
	return fmt.Sprintf("%s (%s): %s", r.Reason, r.Code, r.Message)
}

// RefusalOf reads a call's error as a Refusal: its code, and the reason and metadata of its
// google.rpc.ErrorInfo detail (the service sends exactly one, domain basra.v1). It is nil for
// nil and for an error that carries no gRPC status.
func RefusalOf(err error) *Refusal {
	st, ok := status.FromError(err)
	if err == nil || !ok {
		return nil
	}
	refusal := &Refusal{Code: st.Code(), Reason: st.Code().String(), Message: st.Message()}
	for _, detail := range st.Details() {
		if info, ok := detail.(*errdetails.ErrorInfo); ok {
			refusal.Reason = info.GetReason()
			refusal.Metadata = info.GetMetadata()
			break
		}
	}
	return refusal
}

// refusalOf is a call's error as a *Refusal (err itself when it carries no gRPC status).
func refusalOf(err error) error {
	if refusal := RefusalOf(err); refusal != nil {
		return refusal
	}
	return err
}

// ReasonOf is the reason code of a refused call's error ("" when err is no refusal).
func ReasonOf(err error) string {
	var refusal *Refusal
	if errors.As(err, &refusal) {
		return refusal.Reason
	}
	return ""
}
