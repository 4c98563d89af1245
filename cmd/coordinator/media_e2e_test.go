package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"go.uber.org/fx"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	coordinatorv1 "github.com/coordinator-project/coordinator/gen/coordinator/v1"
	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/builtin"
)

// loopbackMedia swaps the production replace-media-urls plugin for one whose
// address policy lets it fetch from 127.0.0.1, where the test serves images.
// Production has no switch for this: the policy is set from Go only.
var loopbackMedia = fx.Decorate(fx.Annotate(
	func(plugins []steps.Plugin) []steps.Plugin {
		out := make([]steps.Plugin, 0, len(plugins))
		for _, p := range plugins {
			if p.Type == builtin.ReplaceMediaURLsType {
				p = builtin.NewReplaceMediaURLsPluginWith(media.WithPolicy(func(netip.Addr) error { return nil }))
			}
			out = append(out, p)
		}
		return out
	},
	fx.ParamTags(`group:"steps"`), fx.ResultTags(`group:"steps"`),
))

const mediaPipeline = `
pipeline:
  kv_connector: kv-nixl
  ec_connector: ec-nixl
  steps:
    - type: replace-media-urls
    - type: render
      params:
        address: "RENDER_URL"
    - type: encode
    - type: prefill
    - type: decode
`

func pngOf(t *testing.T, c color.Color) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 2, 2))
	img.Set(0, 0, c)
	var b bytes.Buffer
	require.NoError(t, png.Encode(&b, img))
	return b.Bytes()
}

func TestRemoteImagesReachEveryLegInlined(t *testing.T) {
	t.Parallel()
	red, blue := pngOf(t, color.RGBA{R: 255, A: 255}), pngOf(t, color.RGBA{B: 255, A: 255})
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		if r.URL.Path == "/blue.png" {
			_, _ = w.Write(blue)
			return
		}
		_, _ = w.Write(red)
	}))
	t.Cleanup(origin.Close)
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, mediaPipeline, loopbackMedia)

	dataURI := func(b []byte) string { return "data:image/png;base64," + base64.StdEncoding.EncodeToString(b) }
	inline := dataURI(blue)
	tests := []struct {
		name   string
		urls   []string
		inline []string // what each image becomes on the legs
	}{
		{name: "one remote image", urls: []string{origin.URL + "/red.png"}, inline: []string{dataURI(red)}},
		{name: "two remote images", urls: []string{origin.URL + "/red.png", origin.URL + "/blue.png"}, inline: []string{dataURI(red), dataURI(blue)}},
		{name: "inline then remote", urls: []string{inline, origin.URL + "/red.png"}, inline: []string{inline, dataURI(red)}},
	}
	for _, tt := range tests {
		s.Reset()
		var parts []string
		for _, u := range tt.urls {
			parts = append(parts, `{"type":"image_url","image_url":{"url":"`+u+`","detail":"low"}}`)
		}
		body := `{"model":"sim-model","max_tokens":3,"messages":[{"role":"user","content":[{"type":"text","text":"Compare"},` + strings.Join(parts, ",") + `]}]}`
		resp := st.post(t, "/v1/chat/completions", body, nil)
		require.Equal(t, http.StatusOK, resp.StatusCode, tt.name+": "+readAll(t, resp.Body))

		var encodes []sim.Leg
		var prefill, decode sim.Leg
		for _, l := range s.Legs() {
			switch l.Profile {
			case "encode":
				encodes = append(encodes, l)
			case "prefill":
				prefill = l
			case "decode":
				decode = l
			}
		}
		require.Len(t, encodes, len(tt.urls), tt.name)
		for i, u := range tt.inline {
			hash := sim.ImageHash(u)
			assert.Contains(t, string(prefill.Body), u, "%s: prefill carries image %d inlined", tt.name, i)
			assert.Contains(t, string(field(t, prefill.Body, "ec_transfer_params")), hash, tt.name)
			assert.Contains(t, string(decode.Body), `"uuid":"`+hash+`"`, "%s: decode names image %d by its hash", tt.name, i)
			assert.Contains(t, string(decode.Body), `"detail":"low"`, tt.name)
		}
		assert.NotContains(t, string(decode.Body), origin.URL, "%s: no remote URL reaches a worker", tt.name)
	}
}

func TestImageFromAPrivateAddressIsRefused(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(pngOf(t, color.White))
	}))
	t.Cleanup(origin.Close)
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStack(t, gw, render, mediaPipeline) // the production policy
	body := `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + origin.URL + `/x.png"}}]}]}`
	resp := st.post(t, "/v1/chat/completions", body, nil)
	out := readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
	assert.Contains(t, out, "image 0")
	assert.Empty(t, s.Legs(), "nothing reaches render or a worker")
}

// TestImageHostThatDoesNotResolveIsTheClients: an image URL whose host is
// a numeric form that is not an address, or a name that does not exist,
// is a 400 (INVALID_ARGUMENT) naming the host and the part, logged at
// info only: the client's mistake, not an incident.
func TestImageHostThatDoesNotResolveIsTheClients(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	var logs syncBuffer
	st := startStackLogged(t, nil, &logs, gw, render, mediaPipeline) // the production policy and resolver
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	tests := []struct{ host, why string }{
		{host: "127.1", why: "is not valid"},
		{host: "0x7f000001", why: "is not valid"},
		{host: "017700000001", why: "is not valid"},
		{host: "nonexistent.invalid", why: "does not resolve"},
	}
	for i, tt := range tests {
		restID, grpcID := fmt.Sprint("rest-", i), fmt.Sprint("grpc-", i)
		body := `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"http://` + tt.host + `/a.png"}}]}]}`
		want := `downloading image 0: host "` + tt.host + `" ` + tt.why
		where := "(in messages[0].content[0].image_url.url)"

		resp := st.post(t, "/v1/chat/completions", body, http.Header{"X-Request-Id": {restID}})
		out := readAll(t, resp.Body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
		msg, typ, _ := openAIError(t, out)
		assert.Contains(t, msg, want)
		assert.Contains(t, msg, where)
		assert.Equal(t, "invalid_request_error", typ)

		_, err := client.Generate(context.Background(), chatRequest(grpcID, body))
		st := status.Convert(err)
		assert.Equal(t, codes.InvalidArgument, st.Code(), st.Message())
		assert.Contains(t, st.Message(), want)
		assert.Contains(t, st.Message(), where)

		for _, id := range []string{restID, grpcID} {
			levels := logLevels(t, logs.String(), id)
			assert.NotEmpty(t, levels, id)
			for _, l := range levels {
				assert.Contains(t, []string{"INFO", "DEBUG"}, l, "%s: logged at %s", id, l)
			}
		}
	}
	assert.Empty(t, s.Legs(), "nothing reaches render or a worker")
}

// logLevels lists the level of each log line about request id.
func logLevels(t *testing.T, logs, id string) []string {
	t.Helper()
	var levels []string
	for _, line := range strings.Split(logs, "\n") {
		if line == "" {
			continue
		}
		var entry struct {
			Level     string `json:"level"`
			RequestID string `json:"request_id"`
		}
		require.NoError(t, json.Unmarshal([]byte(line), &entry), line)
		if entry.RequestID == id || strings.Contains(line, "(request_id: "+id+")") {
			levels = append(levels, entry.Level)
		}
	}
	return levels
}

// TestInvalidBase64ImageIsRefused: a data: image whose payload is not
// base64 is a 400 (INVALID_ARGUMENT) naming the part and the offset,
// before any leg, whether three bad bytes or a 40 MB run of them.
func TestInvalidBase64ImageIsRefused(t *testing.T) {
	t.Parallel()
	s, gw, render := startSim(t, sim.Options{Strict: true})
	st := startStackEnv(t, map[string]string{"COORDINATOR_SERVER_MAX_REQUEST_BODY_SIZE": "64"}, gw, render, mediaPipeline)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	for _, payload := range []string{"!!!", strings.Repeat("*", 40<<20)} {
		body := `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"text","text":"look"},{"type":"image_url","image_url":{"url":"data:image/png;base64,` + payload + `"}}]}]}`
		want := `invalid base64 at offset 22: "` + payload[:1] + `" is not in the base64 alphabet (A-Z a-z 0-9 + /) (in messages[0].content[1].image_url.url)`

		resp := st.post(t, "/v1/chat/completions", body, nil)
		out := readAll(t, resp.Body)
		assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out[:min(len(out), 300)])
		msg, _, _ := openAIError(t, out)
		assert.Contains(t, msg, want)

		_, err := client.Generate(context.Background(), chatRequest("b64", body))
		st := status.Convert(err)
		assert.Equal(t, codes.InvalidArgument, st.Code())
		assert.Contains(t, st.Message(), want)
	}
	assert.Empty(t, s.Legs(), "nothing reaches render or a worker")
}

// TestTooManyImagesByDefault: past the default max_multimodal_entries
// (64) a request is a 400 (INVALID_ARGUMENT) naming the count and the
// limit, before any leg with replace-media-urls, before any encode leg
// without it (render's own bound, on the images it found); at it, it is
// served with one encode leg per image.
func TestTooManyImagesByDefault(t *testing.T) {
	t.Parallel()
	chat := func(images int) string {
		parts := make([]string, images)
		for i := range parts {
			parts[i] = `{"type":"image_url","image_url":{"url":"data:image/png;base64,` + base64.StdEncoding.EncodeToString([]byte{byte(i)}) + `"}}`
		}
		return `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
	}
	profiles := func(s *sim.Sim) map[string]int {
		n := map[string]int{}
		for _, l := range s.Legs() {
			n[l.Profile]++
		}
		return n
	}
	for name, pipeline := range map[string]string{"replace-media-urls": mediaPipeline, "render alone": fullPipeline} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s, gw, render := startSim(t, sim.Options{Strict: true})
			st := startStack(t, gw, render, pipeline)
			client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
			const want = "too many multimodal entries: got 65, max 64"
			resp := st.post(t, "/v1/chat/completions", chat(65), nil)
			out := readAll(t, resp.Body)
			assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
			msg, _, _ := openAIError(t, out)
			assert.Contains(t, msg, want)
			_, err := client.Generate(context.Background(), chatRequest("many", chat(65)))
			st2 := status.Convert(err)
			assert.Equal(t, codes.InvalidArgument, st2.Code())
			assert.Contains(t, st2.Message(), want)
			assert.Zero(t, profiles(s)["encode"], "refused before any encode leg")
			if pipeline == mediaPipeline {
				assert.Empty(t, s.Legs(), "refused before any leg")
			}

			s.Reset()
			resp = st.post(t, "/v1/chat/completions", chat(64), nil)
			require.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
			assert.Equal(t, 64, profiles(s)["encode"])
		})
	}
}

// TestImageOriginFailureNamesTheImage: an image whose origin answers 404
// is the origin's fault, a 502 (UNAVAILABLE) as the reference answers, but
// one that names the image, its part and the origin's status, not an
// "internal error", and is no ERROR line.
func TestImageOriginFailureNamesTheImage(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.NotFoundHandler())
	t.Cleanup(origin.Close)
	s, gw, render := startSim(t, sim.Options{Strict: true})
	var logs syncBuffer
	st := startStackLogged(t, nil, &logs, gw, render, mediaPipeline, loopbackMedia)
	body := `{"model":"sim-model","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"` + origin.URL + `/gone.png"}}]}]}`
	const want = "downloading image 0: HTTP 404 (in messages[0].content[0].image_url.url)"

	resp := st.post(t, "/v1/chat/completions", body, http.Header{"X-Request-Id": {"rest-404"}})
	out := readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadGateway, resp.StatusCode, out)
	msg, typ, _ := openAIError(t, out)
	assert.Contains(t, msg, want)
	assert.Equal(t, "api_error", typ)

	_, err := coordinatorv1.NewCoordinatorServiceClient(st.conn).Generate(context.Background(), chatRequest("grpc-404", body))
	st2 := status.Convert(err)
	assert.Equal(t, codes.Unavailable, st2.Code())
	assert.Contains(t, st2.Message(), want)
	for _, id := range []string{"rest-404", "grpc-404"} {
		levels := logLevels(t, logs.String(), id)
		assert.NotEmpty(t, levels)
		assert.NotContains(t, levels, "ERROR", id)
	}
	assert.Empty(t, s.Legs())
}

// TestImagesPastTheTotalCap: a request whose images together download more
// than max_total_download_size is a 400 (INVALID_ARGUMENT) naming the cap
// and the image that went past it, before any leg; within it, it is served.
func TestImagesPastTheTotalCap(t *testing.T) {
	t.Parallel()
	big := append(pngOf(t, color.White), make([]byte, 400<<10)...) // trailing bytes: still a PNG to the sniffer
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "image/png")
		_, _ = w.Write(big)
	}))
	t.Cleanup(origin.Close)
	s, gw, render := startSim(t, sim.Options{})
	pipeline := strings.Replace(mediaPipeline, "- type: replace-media-urls",
		"- type: replace-media-urls\n      params:\n        max_total_download_size: 1\n        max_concurrent_downloads: 1", 1)
	st := startStack(t, gw, render, pipeline, loopbackMedia)
	client := coordinatorv1.NewCoordinatorServiceClient(st.conn)
	chat := func(images int) string {
		parts := make([]string, images)
		for i := range parts {
			parts[i] = `{"type":"image_url","image_url":{"url":"` + origin.URL + fmt.Sprintf("/%d.png", i) + `"}}`
		}
		return `{"model":"sim-model","max_tokens":1,"messages":[{"role":"user","content":[` + strings.Join(parts, ",") + `]}]}`
	}
	const want = "downloading image 2: the request's images exceed max_total_download_size, 1 MB in total (in messages[0].content[2].image_url.url)"

	resp := st.post(t, "/v1/chat/completions", chat(3), nil)
	out := readAll(t, resp.Body)
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode, out)
	msg, typ, _ := openAIError(t, out)
	assert.Contains(t, msg, want)
	assert.Equal(t, "invalid_request_error", typ)

	_, err := client.Generate(context.Background(), chatRequest("total", chat(3)))
	st2 := status.Convert(err)
	assert.Equal(t, codes.InvalidArgument, st2.Code())
	assert.Contains(t, st2.Message(), want)
	assert.Empty(t, s.Legs(), "refused before any leg")

	resp = st.post(t, "/v1/chat/completions", chat(2), nil)
	assert.Equal(t, http.StatusOK, resp.StatusCode, readAll(t, resp.Body))
}
