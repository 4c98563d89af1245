package main

import (
	"bytes"
	"encoding/base64"
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

	"github.com/coordinator-project/coordinator/sim"
	"github.com/coordinator-project/coordinator/steps"
	"github.com/coordinator-project/coordinator/steps/media"
)

// loopbackMedia swaps the production replace-media-urls plugin for one whose
// address policy lets it fetch from 127.0.0.1, where the test serves images.
// Production has no switch for this: the policy is set from Go only.
var loopbackMedia = fx.Decorate(fx.Annotate(
	func(plugins []steps.Plugin) []steps.Plugin {
		out := make([]steps.Plugin, 0, len(plugins))
		for _, p := range plugins {
			if p.Type == steps.ReplaceMediaURLsType {
				p = steps.NewReplaceMediaURLsPluginWith(media.WithPolicy(func(netip.Addr) error { return nil }))
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
