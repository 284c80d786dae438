package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"regexp"
	"strings"

	"github.com/grpc-ecosystem/grpc-gateway/v2/runtime"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
)

// newCodec is the one JSON marshaler of the port: proto3's canonical JSON mapping (protojson)
// both ways. Answers leave out fields at their default values, as the mapping's canonical form
// does; a request with a field its message does not have is refused (UNKNOWN_FIELD), not
// silently cut short (docs/http.md, "Decisions").
func newCodec() *codec {
	return &codec{JSONPb: runtime.JSONPb{
		MarshalOptions:   protojson.MarshalOptions{EmitUnpopulated: false},
		UnmarshalOptions: protojson.UnmarshalOptions{DiscardUnknown: false},
	}}
}

// codec is runtime.JSONPb with a decoder of its own: it reads the whole body (bounded by
// guard's MaxBytesReader), so data after the JSON value is refused too, and when a body is
// refused it notes why (a reason of ours) on the request, where the error handler finds it:
// grpc-gateway's generated code turns every decode error into a bare INVALID_ARGUMENT.
type codec struct {
	runtime.JSONPb
}

// unknownField finds the field's name in protojson's error (its prefix "proto:" is followed by
// a space or, at random, a no-break space, so only the part after it is matched).
var unknownField = regexp.MustCompile(`unknown field "([^"]*)"`)

// NewDecoder reads one request body.
func (c *codec) NewDecoder(r io.Reader) runtime.Decoder {
	return runtime.DecoderFunc(func(v any) error {
		n := noteOf(r)
		body, err := io.ReadAll(r)
		if err != nil {
			if tooLarge := (*http.MaxBytesError)(nil); errors.As(err, &tooLarge) {
				return n.refuse(bodyTooLarge(tooLarge.Limit))
			}
			return n.refuse(refusal(reasonBodyUnread, "The request body could not be read.", nil))
		}
		if len(bytes.TrimSpace(body)) == 0 {
			return io.EOF // an empty body is the empty request, as grpc-gateway's handlers take it
		}
		message, ok := v.(proto.Message)
		if !ok {
			return n.refuse(refusal(reasonInvalidValue, "The request body does not fit the request message.", nil))
		}
		if err := c.UnmarshalOptions.Unmarshal(body, message); err != nil {
			return n.refuse(decodeRefusal(body, err))
		}
		return nil
	})
}

// decodeRefusal says why protojson refused a body: not JSON at all, a field the message does
// not have, or JSON whose value does not fit its field (a wrong type, an unknown enum name, a
// number out of range, a duplicate field, a top level that is not an object).
func decodeRefusal(body []byte, err error) refused {
	if !json.Valid(body) {
		return refusal(reasonMalformedJSON, "The request body is not a JSON value.", nil)
	}
	text := protojsonText(err)
	if m := unknownField.FindStringSubmatch(text); m != nil {
		return refusal(reasonUnknownField, "The request body has a field that the request message does not have: "+m[1]+".",
			map[string]string{"field": m[1]})
	}
	return refusal(reasonInvalidValue, "The request body does not fit the request message: "+text+".", nil)
}

// protojsonText is protojson's error without its "proto:" prefix.
func protojsonText(err error) string {
	text := strings.ReplaceAll(err.Error(), "\u00a0", " ")
	return strings.TrimSpace(strings.TrimPrefix(text, "proto:"))
}
