package main

import (
	"bytes"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/types/known/durationpb"

	basrav1 "example.com/basra-rules/gateway/pb/basra/v1"
)

// decode runs the codec's decoder over body as the gateway does (a noted, bounded body) and
// returns the reason it refused it with ("" when it took it).
func decode(t *testing.T, body string, limit int64) (string, *basrav1.NewMatchRequest) {
	t.Helper()
	n := &note{}
	reader := &notedBody{http.MaxBytesReader(httptest.NewRecorder(), io.NopCloser(strings.NewReader(body)), limit), n}
	message := &basrav1.NewMatchRequest{}
	err := newCodec().NewDecoder(reader).Decode(message)
	if err == nil || err == io.EOF {
		if n.refusal != nil {
			t.Fatalf("%q: taken, yet noted %v", body, n.refusal)
		}
		return "", message
	}
	if n.refusal == nil {
		t.Fatalf("%q: refused (%v) without a note", body, err)
	}
	return n.refusal.reason, message
}

func TestTheDecoderRefusesEachKindOfBadBodyWithItsReason(t *testing.T) {
	for body, want := range map[string]string{
		`{"seed": "YQ==", "labels": ["a"]}`:   "",
		`{"seed": "YQ==", "labels": ["a"]}  `: "",
		``:                                    "",
		`{"seed": `:                           reasonMalformedJSON,
		`{"seed": "YQ=="} {}`:                 reasonMalformedJSON,
		"\x00\xff":                            reasonMalformedJSON,
		`{"colour": 1}`:                       reasonUnknownField,
		`{"seed": 12}`:                        reasonInvalidValue,
		`{"seed": "YQ==", "seed": "Yg=="}`:    reasonInvalidValue,
		`[]`:                                  reasonInvalidValue,
		`{"labels": ["` + strings.Repeat("x", 64) + `"]}`:       reasonBodyTooLarge,
		strings.Repeat("[", 20000) + strings.Repeat("]", 20000): reasonBodyTooLarge,
	} {
		if got, _ := decode(t, body, 60); got != want {
			t.Errorf("%.40q: reason %q, want %q", body, got, want)
		}
	}
	if _, message := decode(t, `{"seed": "YQ==", "labels": ["a"]}`, 1<<20); string(message.GetSeed()) != "a" {
		t.Errorf("the body was not read into the message: %v", message)
	}
	if got, _ := decode(t, strings.Repeat("[", 20000)+strings.Repeat("]", 20000), 1<<20); got != reasonMalformedJSON {
		t.Errorf("deep nesting: %q", got) // past encoding/json's depth bound: not JSON to it
	}
}

func TestTheUnknownFieldIsNamed(t *testing.T) {
	n := &note{}
	reader := &notedBody{io.NopCloser(strings.NewReader(`{"seed": "YQ==", "colour": 1}`)), n}
	_ = newCodec().NewDecoder(reader).Decode(&basrav1.NewMatchRequest{})
	if n.refusal == nil || n.refusal.metadata["field"] != "colour" {
		t.Fatalf("%+v", n.refusal)
	}
}

func TestOnlyJSONInUTF8IsAMediaType(t *testing.T) {
	for _, good := range []string{"application/json", "application/json; charset=utf-8", "Application/JSON; charset=UTF-8"} {
		if _, bad := mediaTypeRefusal([]string{good}); bad {
			t.Errorf("%q refused", good)
		}
	}
	for _, values := range [][]string{nil, {""}, {"text/plain"}, {"application/json; charset=latin1"},
		{"application/json; version=2"}, {"application/json", "application/json"}, {"application/x-www-form-urlencoded"}} {
		if r, bad := mediaTypeRefusal(values); !bad || r.http != http.StatusUnsupportedMediaType {
			t.Errorf("%q taken", values)
		}
	}
}

func TestAGRPCTimeoutIsUpToEightDigitsAndAUnit(t *testing.T) {
	for value, ok := range map[string]bool{"2S": true, "99999999H": true, "1n": true, "0m": true,
		"123456789S": false, "5x": false, "S": false, "-1S": false, "1.5S": false, " 1S": false} {
		if grpcTimeout.MatchString(value) != ok {
			t.Errorf("%q: %v", value, !ok)
		}
	}
}

func TestRetryAfterIsTheServersDelayInWholeSecondsOrOneForUnavailable(t *testing.T) {
	delay := func(d time.Duration) *errdetails.RetryInfo {
		return &errdetails.RetryInfo{RetryDelay: durationpb.New(d)}
	}
	for _, c := range []struct {
		code  codes.Code
		retry *errdetails.RetryInfo
		want  string
	}{
		{codes.ResourceExhausted, delay(150 * time.Millisecond), "1"},
		{codes.ResourceExhausted, delay(2100 * time.Millisecond), "3"},
		{codes.ResourceExhausted, nil, ""},
		{codes.Unavailable, nil, "1"},
		{codes.Unavailable, delay(4 * time.Second), "4"},
	} {
		if got, _ := retryAfter(c.code, c.retry); got != c.want {
			t.Errorf("%v %v: %q, want %q", c.code, c.retry, got, c.want)
		}
	}
}

func TestEveryKindHasAReasonAndEveryCodeItsGoogleName(t *testing.T) {
	seen := map[string]bool{}
	for _, k := range kinds {
		if seen[k.Reason] || k.HTTP < 400 || k.Code == "" || k.When == "" {
			t.Errorf("%+v", k)
		}
		seen[k.Reason] = true
	}
	for c, want := range map[codes.Code]string{codes.OK: "OK", codes.Canceled: "CANCELLED",
		codes.InvalidArgument: "INVALID_ARGUMENT", codes.DeadlineExceeded: "DEADLINE_EXCEEDED"} {
		if got := codeName(c); got != want {
			t.Errorf("%v: %q", c, got)
		}
	}
	var out bytes.Buffer
	if err := describe(&out); err != nil || !strings.Contains(out.String(), `"UNAUTHENTICATED":401`) {
		t.Fatalf("%v %s", err, out.String())
	}
}
