package main

import (
	"context"
	"log/slog"
	"net/http"
	"net/textproto"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/grpc/metadata"
)

// TransportKey is the metadata the gateway marks its calls with; the server reads it into the
// label transport="http" of its per-call metrics and the field of its rpc log line.
const TransportKey = "basra-transport"

// forwarded are the request headers handed to the server as gRPC metadata of the same name:
// W3C trace context, so the server's span continues the caller's trace, and the request id of
// its log line. Grpc-Timeout is grpc-gateway's own: it becomes the call's deadline.
var forwarded = map[string]string{
	"Traceparent":  "traceparent",
	"Tracestate":   "tracestate",
	"X-Request-Id": "x-request-id",
}

func incomingHeader(key string) (string, bool) {
	name, ok := forwarded[textproto.CanonicalMIMEHeaderKey(key)]
	return name, ok
}

// newMux is grpc-gateway's ServeMux as this port uses it: one JSON codec for every
// Content-Type it lets through, the refusals of refusals.go, no method override and no
// form-encoded fallback (every route is POST with a JSON body).
func newMux(maxBodyBytes int64, logger *slog.Logger) *runtime.ServeMux {
	return runtime.NewServeMux(
		runtime.WithMarshalerOption(runtime.MIMEWildcard, newCodec()),
		runtime.WithIncomingHeaderMatcher(incomingHeader),
		runtime.WithMetadata(func(context.Context, *http.Request) metadata.MD {
			return metadata.Pairs(TransportKey, "http")
		}),
		// The backend's own headers and trailers (content-type, grpc-accept-encoding) say
		// nothing to an HTTP caller.
		runtime.WithOutgoingHeaderMatcher(dropped),
		runtime.WithOutgoingTrailerMatcher(dropped),
		runtime.WithErrorHandler(errorHandler(logger)),
		runtime.WithRoutingErrorHandler(routingErrorHandler),
		runtime.WithMiddlewares(checked(maxBodyBytes)),
		runtime.WithDisableHTTPMethodOverride(),
		runtime.WithDisablePathLengthFallback(),
		runtime.WithWriteContentLength(),
	)
}

func dropped(string) (string, bool) { return "", false }
