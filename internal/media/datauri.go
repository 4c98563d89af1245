package media

import (
	"strings"
)

// imageTypes are the media types an inlined image may have (decision D8
// extends the reference's data URI allowlist to downloads).
var imageTypes = map[string]bool{
	"image/jpeg": true,
	"image/png":  true,
	"image/gif":  true,
	"image/webp": true,
}

// ImageType reports whether mediaType, a bare lowercase media type, is one
// of the allowed image types: image/jpeg, image/png, image/gif, image/webp.
func ImageType(mediaType string) bool { return imageTypes[mediaType] }

const dataScheme = "data:"

// IsDataURI reports whether s has the data: scheme (case-insensitive, as
// URI schemes are).
func IsDataURI(s string) bool {
	return len(s) >= len(dataScheme) && strings.EqualFold(s[:len(dataScheme)], dataScheme)
}

// ParseDataURI checks a "data:<media type>[;param]...;base64,<payload>"
// URI as the reference does: it splits at the first comma; the media type
// is the text before the first ';', trimmed and lowercased, and must be an
// allowed image type; one of the parameters must be base64
// (case-insensitive, anywhere in the list). The payload must be non-empty
// base64 as vLLM decodes it (checkBase64: checked in one pass, not
// decoded) and is returned as is. Errors are *Error with Reason ErrDataURI
// (ErrNotImage for a media type outside the allowlist); a bad payload's
// names the offset in uri of its first bad byte.
func ParseDataURI(uri string) (mediaType, payload string, err error) {
	if !IsDataURI(uri) {
		return "", "", newError(ErrDataURI, "not a data URI")
	}
	meta, payload, ok := strings.Cut(uri[len(dataScheme):], ",")
	if !ok {
		return "", "", newError(ErrDataURI, "missing comma")
	}
	mediaType, params, _ := strings.Cut(meta, ";")
	mediaType = strings.ToLower(strings.TrimSpace(mediaType))
	base64 := false
	for p := range strings.SplitSeq(params, ";") {
		if strings.EqualFold(strings.TrimSpace(p), "base64") {
			base64 = true
			break
		}
	}
	switch {
	case !base64:
		return "", "", newError(ErrDataURI, "missing base64 parameter")
	case mediaType == "":
		return "", "", newError(ErrDataURI, "missing media type")
	case !ImageType(mediaType):
		return "", "", newError(ErrNotImage, "media type %q is not an allowed image type", truncate(mediaType))
	case payload == "":
		return "", "", newError(ErrDataURI, "empty payload")
	}
	if off, err := checkBase64(payload); err != nil {
		return "", "", newError(ErrDataURI, "invalid base64 at offset %d: %v", len(uri)-len(payload)+off, err)
	}
	return mediaType, payload, nil
}

// truncate shortens client- or origin-controlled text quoted in errors.
func truncate(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
