package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"mime"
	"net/http"
	"regexp"
	"runtime/debug"
	"strconv"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Domain is the ErrorInfo domain of every refusal, the server's and the gateway's alike.
const Domain = "basra.v1"

// The reasons of the refusals the gateway makes itself, before any call reaches the server or
// when no answer came from it. They are stable, like the server's.
const (
	reasonMalformedJSON    = "MALFORMED_JSON"
	reasonUnknownField     = "UNKNOWN_FIELD"
	reasonInvalidValue     = "INVALID_VALUE"
	reasonBodyTooLarge     = "BODY_TOO_LARGE"
	reasonBodyUnread       = "BODY_UNREAD"
	reasonMediaType        = "UNSUPPORTED_MEDIA_TYPE"
	reasonInvalidTimeout   = "INVALID_TIMEOUT"
	reasonRouteNotFound    = "ROUTE_NOT_FOUND"
	reasonMethodNotAllowed = "METHOD_NOT_ALLOWED"
	reasonUnavailable      = "BACKEND_UNAVAILABLE"
	reasonDeadline         = "DEADLINE_EXPIRED"
)

// kind is what a reason of the gateway's answers with, and when it is given.
type kind struct {
	Reason string `json:"reason"`
	HTTP   int    `json:"http"`
	Code   string `json:"code"`
	When   string `json:"when"`
	code   codes.Code
}

// kinds is the one home of the gateway's reasons: docs/http.md's table is checked against it
// (basra-gateway --describe prints it), and every refusal of the gateway is built from it.
var kinds = []kind{
	{reasonMalformedJSON, 400, "", "the body is not one JSON value (or has data after it)", codes.InvalidArgument},
	{reasonUnknownField, 400, "", "the body has a field the request message does not have (metadata `field`)", codes.InvalidArgument},
	{reasonInvalidValue, 400, "", "JSON whose value does not fit the request message: a wrong type, an unknown enum name, a number out of range, bad base64, a duplicate field, a top level that is not an object", codes.InvalidArgument},
	{reasonBodyTooLarge, 413, "", "the body is longer than `--max-body-bytes` (metadata `maxBodyBytes`)", codes.ResourceExhausted},
	{reasonBodyUnread, 400, "", "the body ended before its Content-Length, or could not be read", codes.InvalidArgument},
	{reasonMediaType, 415, "", "the Content-Type is not `application/json` (a charset other than UTF-8 included; metadata `contentType`)", codes.InvalidArgument},
	{reasonInvalidTimeout, 400, "", "the Grpc-Timeout header is not 1 to 8 digits and a unit (H, M, S, m, u, n), or comes twice", codes.InvalidArgument},
	{reasonRouteNotFound, 404, "", "the path is no route (metadata `path`)", codes.NotFound},
	{reasonMethodNotAllowed, 405, "", "a route asked with another method than POST (header `Allow: POST`; metadata `method`)", codes.Unimplemented},
	{reasonUnavailable, 503, "", "the gRPC server could not be reached (after the published retry policy's attempts); `Retry-After: 1`", codes.Unavailable},
	{reasonDeadline, 504, "", "the call's deadline passed before the gRPC server answered (the server's own reason when it is the server that finds it)", codes.DeadlineExceeded},
}

func init() {
	for i := range kinds {
		kinds[i].Code = codeName(kinds[i].code)
	}
}

// codeName is a code's name as google.rpc.Code and the server's logs spell it.
func codeName(c codes.Code) string {
	if c == codes.Canceled {
		return "CANCELLED"
	}
	name := c.String()
	var out []byte
	for i := 0; i < len(name); i++ {
		if i > 0 && name[i] >= 'A' && name[i] <= 'Z' && name[i-1] >= 'a' {
			out = append(out, '_')
		}
		out = append(out, name[i])
	}
	return strings.ToUpper(string(out))
}

// refusal is a refusal of the gateway's for `reason`, with its kind's status and code.
func refusal(reason, message string, metadata map[string]string) refused {
	for _, k := range kinds {
		if k.Reason == reason {
			return refused{reason, k.HTTP, k.code, message, metadata}
		}
	}
	panic("basra-gateway: no kind for reason " + reason)
}

// describe prints the gateway's reasons and grpc-gateway's mapping of every gRPC code to an
// HTTP status, as JSON (what docs/http.md's tables are checked against).
func describe(w io.Writer) error {
	mapping := map[string]int{}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		mapping[codeName(c)] = runtime.HTTPStatusFromCode(c)
	}
	return json.NewEncoder(w).Encode(map[string]any{"reasons": kinds, "codes": mapping})
}

// internalMessage is what the caller of a failed call learns (the server's own sentence,
// service/errors.py INTERNAL_MESSAGE): that it failed, not how. The log says how.
const internalMessage = "The server failed on this call; nothing was changed."

// refused is a refusal the gateway makes: its reason, HTTP status, gRPC code, sentence and
// ErrorInfo metadata (keys in lowerCamelCase, as AIP-193 and the server's have them).
type refused struct {
	reason   string
	http     int
	code     codes.Code
	message  string
	metadata map[string]string
}

func (r refused) Error() string { return r.reason + ": " + r.message }

// status is the google.rpc.Status of the refusal, with its ErrorInfo.
func (r refused) status() *status.Status {
	s, err := status.New(r.code, r.message).WithDetails(
		&errdetails.ErrorInfo{Reason: r.reason, Domain: Domain, Metadata: r.metadata})
	if err != nil { // only a detail that cannot be marshalled fails: never ErrorInfo
		return status.New(r.code, r.message)
	}
	return s
}

func bodyTooLarge(limit int64) refused {
	return refusal(reasonBodyTooLarge, fmt.Sprintf("The request body is larger than %d bytes.", limit),
		map[string]string{"maxBodyBytes": strconv.FormatInt(limit, 10)})
}

// note carries the refusal a request's body met from the decoder, which sees only the body, to
// the error handler, which sees the request.
type note struct{ refusal *refused }

type noteKey struct{}

func (n *note) refuse(r refused) error {
	if n != nil {
		n.refusal = &r
	}
	return r
}

// notedBody is a request body that knows its request's note.
type notedBody struct {
	io.ReadCloser
	note *note
}

func noteOf(r io.Reader) *note {
	if b, ok := r.(*notedBody); ok {
		return b.note
	}
	return nil
}

// grpcTimeout is the gRPC wire format of a timeout: at most 8 digits and a unit.
var grpcTimeout = regexp.MustCompile(`^[0-9]{1,8}[HMSmun]$`)

// checked refuses, before any call, a request the server must not see: a Content-Type that is
// not JSON, a Grpc-Timeout that is not one, a body over the bound. It runs on matched routes
// only (an unknown route or method is the routing error handler's).
func checked(maxBodyBytes int64) runtime.Middleware {
	return func(next runtime.HandlerFunc) runtime.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request, pathParams map[string]string) {
			if refusal, bad := mediaTypeRefusal(r.Header.Values("Content-Type")); bad {
				writeRefusal(w, refusal)
				return
			}
			if values := r.Header.Values("Grpc-Timeout"); len(values) > 1 ||
				(len(values) == 1 && !grpcTimeout.MatchString(values[0])) {
				writeRefusal(w, refusal(reasonInvalidTimeout, "The Grpc-Timeout header is not a gRPC timeout (1 to 8 digits and a unit of H, M, S, m, u, n).",
					nil))
				return
			}
			if r.ContentLength > maxBodyBytes {
				writeRefusal(w, bodyTooLarge(maxBodyBytes))
				return
			}
			n := &note{}
			r.Body = &notedBody{http.MaxBytesReader(w, r.Body, maxBodyBytes), n}
			next(w, r.WithContext(context.WithValue(r.Context(), noteKey{}, n)), pathParams)
		}
	}
}

// mediaTypeRefusal refuses a body that does not say it is JSON (application/json, with no
// parameter but a charset of UTF-8).
func mediaTypeRefusal(values []string) (refused, bool) {
	bad := refusal(reasonMediaType, "The request body must be JSON, sent with the header Content-Type: application/json.",
		map[string]string{"contentType": ""})
	if len(values) != 1 {
		if len(values) > 1 {
			bad.metadata["contentType"] = values[0]
		}
		return bad, true
	}
	bad.metadata["contentType"] = values[0]
	mediaType, params, err := mime.ParseMediaType(values[0])
	if err != nil || mediaType != "application/json" {
		return bad, true
	}
	for key, value := range params {
		if key != "charset" || !strings.EqualFold(value, "utf-8") {
			return bad, true
		}
	}
	return refused{}, false
}

// writeRefusal answers a refusal of the gateway's own as grpc-gateway answers any error: the
// google.rpc.Status as JSON.
func writeRefusal(w http.ResponseWriter, r refused) {
	body, err := newCodec().Marshal(r.status().Proto())
	if err != nil {
		body = []byte(`{"code":13,"message":"` + internalMessage + `"}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(r.http)
	_, _ = w.Write(body)
}

// errorHandler renders every error of a routed call. A refusal of the server (its
// google.rpc.Status has an ErrorInfo) goes out as it is, with the standard mapping of its code
// to an HTTP status; one the gateway made gets its reason. A failure (INTERNAL, UNKNOWN,
// DATA_LOSS) goes out as the server's one sentence and nothing else; the log has the rest.
func errorHandler(logger *slog.Logger) runtime.ErrorHandlerFunc {
	return func(ctx context.Context, mux *runtime.ServeMux, m runtime.Marshaler, w http.ResponseWriter,
		r *http.Request, err error) {
		if n, ok := ctx.Value(noteKey{}).(*note); ok && n.refusal != nil {
			writeRefusal(w, *n.refusal)
			return
		}
		if routing := (*runtime.HTTPStatusError)(nil); errors.As(err, &routing) {
			// The mux's only one: a path with a malformed escape sequence, which is no route.
			writeRefusal(w, notFound(r))
			return
		}
		s := status.Convert(err)
		httpStatus := runtime.HTTPStatusFromCode(s.Code())
		info, retry := detailsOf(s)
		switch {
		case httpStatus == http.StatusInternalServerError:
			if info == nil || info.GetDomain() != Domain {
				if s.Message() != internalMessage {
					logger.Error("call failed", "path", r.URL.Path, "code", s.Code().String(),
						"error", s.Message())
				}
				s = status.New(codes.Internal, internalMessage)
			}
		case info == nil:
			if s.Code() == codes.Unavailable {
				logger.Warn("backend unavailable", "path", r.URL.Path, "error", s.Message())
			}
			s = madeHere(s).status()
		}
		if httpStatus == http.StatusTooManyRequests || httpStatus == http.StatusServiceUnavailable {
			if after, ok := retryAfter(s.Code(), retry); ok {
				w.Header().Set("Retry-After", after)
			}
		}
		runtime.DefaultHTTPErrorHandler(ctx, mux, m, w, r,
			&runtime.HTTPStatusError{HTTPStatus: httpStatus, Err: s.Err()})
	}
}

// madeHere names an error that came from no refusal of the server (it carries no ErrorInfo):
// grpc-go's own, about the backend or the deadline; any other (the caller gone: CANCELLED)
// gets its code's name as its reason.
// Its sentence is the gateway's own: grpc-go's would name the backend's address.
func madeHere(s *status.Status) refused {
	reason, message := codeName(s.Code()), s.Message()
	switch s.Code() {
	case codes.Unavailable:
		reason, message = reasonUnavailable, "The rules server cannot be reached now; nothing was done. Try again."
	case codes.DeadlineExceeded:
		reason, message = reasonDeadline, "The call's deadline passed before the rules server answered."
	}
	return refused{reason, runtime.HTTPStatusFromCode(s.Code()), s.Code(), message, nil}
}

// detailsOf finds a status's ErrorInfo and RetryInfo.
func detailsOf(s *status.Status) (*errdetails.ErrorInfo, *errdetails.RetryInfo) {
	var info *errdetails.ErrorInfo
	var retry *errdetails.RetryInfo
	for _, detail := range s.Details() {
		switch d := detail.(type) {
		case *errdetails.ErrorInfo:
			if info == nil {
				info = d
			}
		case *errdetails.RetryInfo:
			retry = d
		}
	}
	return info, retry
}

// retryAfter is the Retry-After of a 429 or 503, in whole seconds (rounded up, at least 1):
// the server's RetryInfo when it gives one. Without it, an UNAVAILABLE (a backend away or
// going) says 1 s; a RESOURCE_EXHAUSTED says nothing, because the server gives no RetryInfo
// when the same request would be refused again (a bound on its size or work: gRPC callers are
// told not to retry, by pushback), so neither is an HTTP caller.
func retryAfter(code codes.Code, retry *errdetails.RetryInfo) (string, bool) {
	if retry != nil && retry.GetRetryDelay() != nil {
		seconds := math.Ceil(retry.GetRetryDelay().AsDuration().Seconds())
		return strconv.Itoa(int(max(1, seconds))), true
	}
	if code == codes.Unavailable {
		return "1", true
	}
	return "", false
}

// routingErrorHandler answers a request no route takes: a known path with another method than
// POST (405, with Allow), any other (404: an unknown path, or one that is not a path).
func routingErrorHandler(_ context.Context, _ *runtime.ServeMux, _ runtime.Marshaler, w http.ResponseWriter,
	r *http.Request, httpStatus int) {
	switch httpStatus {
	case http.StatusMethodNotAllowed:
		w.Header().Set("Allow", http.MethodPost)
		writeRefusal(w, refusal(reasonMethodNotAllowed, "Every route takes POST only.", map[string]string{"method": r.Method}))
	default:
		writeRefusal(w, notFound(r))
	}
}

func notFound(r *http.Request) refused {
	return refusal(reasonRouteNotFound, "No route has this path: each is POST /basra.v1.RulesService/<Method>.",
		map[string]string{"path": r.URL.Path})
}

// recovered turns a panic of the gateway into a 500 of the one sentence (no internals), and
// logs it with its stack; http.Server would only drop the connection.
func recovered(next http.Handler, logger *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			if p := recover(); p != nil {
				if p == http.ErrAbortHandler {
					panic(p)
				}
				logger.Error("panic", "path", r.URL.Path, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
				body := []byte(`{"code":13,"message":"` + internalMessage + `"}`)
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusInternalServerError)
				_, _ = w.Write(body)
			}
		}()
		next.ServeHTTP(w, r)
	})
}
