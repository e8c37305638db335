package gadget

// Configuration and outbound HTTP, as far as the operator grants them.

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"wit_component/wasi_http_outgoing_handler"
	"wit_component/wasi_http_types"
	"wit_component/wasi_io_streams"

	witTypes "go.bytecodealliance.org/pkg/wit/types"
)

// Config returns a configuration value the operator granted this plugin (the
// manifest asks for the key under [permissions] config). Granted values are
// the instance's environment, so os.Getenv reads them too; nothing else of
// the host's environment is there. Secret values are redacted from
// everything the gadget sends back.
func Config(key string) (string, bool) {
	return os.LookupEnv(key)
}

// Response is an HTTP response, read whole (the host caps its size).
type Response struct {
	Status int
	// Header names are lower case.
	Headers [][2]string
	Body    []byte
}

// Text is the body as a string.
func (r *Response) Text() string { return string(r.Body) }

// Header is the first value of a header ("" when absent).
func (r *Response) Header(name string) string {
	name = strings.ToLower(name)
	for _, h := range r.Headers {
		if h[0] == name {
			return h[1]
		}
	}
	return ""
}

// ErrHTTPDenied: the host refused the request, the origin is not granted to
// this plugin (the call's log names the grant that would allow it).
var ErrHTTPDenied = errors.New("the host refused the request (the call's log says why and what would allow it: an origin or address not granted, the call's request cap, or a secret's placeholder where the secret may not go)")

func httpFailure(code wasi_http_types.ErrorCode) error {
	switch code.Tag() {
	case wasi_http_types.ErrorCode_HttpRequestDenied:
		return ErrHTTPDenied
	case wasi_http_types.ErrorCode_HttpResponseBodySize:
		return fmt.Errorf("the response body is over the host's %d-byte limit", code.HttpResponseBodySize().SomeOr(0))
	case wasi_http_types.ErrorCode_ConnectionTimeout:
		return errors.New("timed out (the call's deadline, or the connection)")
	}
	return fmt.Errorf("request failed (wasi:http error code %d)", code.Tag())
}

// HTTPGet sends GET url over the standard wasi:http interface. The host
// sends it, only to the origins the operator granted this plugin (the
// manifest asks under [permissions] http); redirects come back as they are.
func HTTPGet(url string, headers map[string]string) (*Response, error) {
	scheme, rest, found := strings.Cut(url, "://")
	if !found {
		return nil, fmt.Errorf("invalid URL %q: no scheme", url)
	}
	cut := strings.IndexAny(rest, "/?")
	if cut < 0 {
		cut = len(rest)
	}
	authority, path := rest[:cut], rest[cut:]
	if path == "" {
		path = "/"
	} else if path[0] == '?' {
		path = "/" + path
	}
	entries := []witTypes.Tuple2[string, []uint8]{}
	for name, value := range headers {
		entries = append(entries, witTypes.Tuple2[string, []uint8]{F0: name, F1: []uint8(value)})
	}
	fields := wasi_http_types.FieldsFromList(entries)
	if fields.IsErr() {
		return nil, errors.New("a header is not valid (or not allowed)")
	}
	request := wasi_http_types.MakeOutgoingRequest(fields.Ok())
	var wasiScheme wasi_http_types.Scheme
	switch strings.ToLower(scheme) {
	case "https":
		wasiScheme = wasi_http_types.MakeSchemeHttps()
	case "http":
		wasiScheme = wasi_http_types.MakeSchemeHttp()
	default:
		request.Drop()
		return nil, fmt.Errorf("invalid URL %q: scheme %q", url, scheme)
	}
	if request.SetMethod(wasi_http_types.MakeMethodGet()).IsErr() ||
		request.SetScheme(witTypes.Some(wasiScheme)).IsErr() ||
		request.SetAuthority(witTypes.Some(authority)).IsErr() ||
		request.SetPathWithQuery(witTypes.Some(path)).IsErr() {
		request.Drop()
		return nil, fmt.Errorf("invalid URL %q", url)
	}
	body := request.Body()
	if body.IsErr() {
		request.Drop()
		return nil, errors.New("the request has no body")
	}
	sent := wasi_http_outgoing_handler.Handle(request, witTypes.None[*wasi_http_types.RequestOptions]())
	if sent.IsErr() {
		return nil, httpFailure(sent.Err())
	}
	wasi_http_types.OutgoingBodyFinish(body.Ok(), witTypes.None[*wasi_http_types.Fields]())
	future := sent.Ok()
	defer future.Drop()
	ready := future.Subscribe()
	ready.Block()
	ready.Drop()
	answer := future.Get()
	if answer.IsNone() || answer.Some().IsErr() {
		return nil, errors.New("no response")
	}
	outcome := answer.Some().Ok()
	if outcome.IsErr() {
		return nil, httpFailure(outcome.Err())
	}
	response := outcome.Ok()
	defer response.Drop()
	out := &Response{Status: int(response.Status())}
	responseHeaders := response.Headers()
	for _, entry := range responseHeaders.Entries() {
		out.Headers = append(out.Headers, [2]string{strings.ToLower(entry.F0), string(entry.F1)})
	}
	responseHeaders.Drop()
	consumed := response.Consume()
	if consumed.IsErr() {
		return nil, errors.New("the response has no body")
	}
	incoming := consumed.Ok()
	defer incoming.Drop()
	opened := incoming.Stream()
	if opened.IsErr() {
		return nil, errors.New("the response has no body stream")
	}
	stream := opened.Ok()
	defer stream.Drop()
	for {
		chunk := stream.BlockingRead(65536)
		if chunk.IsErr() {
			failure := chunk.Err()
			if failure.Tag() == wasi_io_streams.StreamError_Closed {
				break
			}
			code := wasi_http_types.HttpErrorCode(failure.LastOperationFailed())
			if code.IsSome() {
				return nil, httpFailure(code.Some())
			}
			return nil, errors.New("reading the body failed")
		}
		out.Body = append(out.Body, chunk.Ok()...)
	}
	return out, nil
}
