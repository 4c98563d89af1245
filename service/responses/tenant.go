package responses

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"

	"google.golang.org/grpc/metadata"
)

// tenantAuthorization as the tenant header takes the bearer token's digest.
const tenantAuthorization = "authorization"

// Tenant is the tenant of a call with metadata md (a REST request's
// headers arrive as lowercase metadata): the value of the configured
// tenant header, "" without one. For "authorization" it is the SHA-256 of
// the bearer token (hex), never the token itself.
func (s *Store) Tenant(md metadata.MD) string {
	name := strings.ToLower(s.opts.TenantHeader)
	if name == "" {
		return ""
	}
	vs := md.Get(name)
	if len(vs) == 0 {
		return ""
	}
	if name != tenantAuthorization {
		return vs[0]
	}
	token := vs[0]
	if len(token) > 7 && strings.EqualFold(token[:7], "bearer ") {
		token = strings.TrimSpace(token[7:])
	}
	sum := sha256.Sum256([]byte(token))
	return "sha256:" + hex.EncodeToString(sum[:])
}
