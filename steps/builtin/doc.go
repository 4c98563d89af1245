// Package builtin holds the coordinator's built-in pipeline steps, one file
// each: replace-media-urls (replace_media_urls.go), render (render.go),
// conditional-decode (conditional_decode.go), encode (encode.go), prefill
// (prefill.go) and decode (decode.go). Module provides them to the "steps"
// value group, from which the service builds the configured pipeline.
package builtin
