package service

import (
	"testing"

	"github.com/stretchr/testify/assert"
)

func TestJoinVersions(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		from string
		more []string
		want string
	}{
		{from: "v1", more: []string{"v2"}, want: "v1,v2"},
		{from: "v1", more: []string{"v1,v2"}, want: "v1,v2"},
		{from: "v1,v2", more: []string{"v2"}, want: "v1,v2"},
		{from: "v1,v2", more: []string{"v2,v3"}, want: "v1,v2,v3"},
		{from: "v1", more: []string{"v1"}, want: "v1"},
		{from: "v1", more: nil, want: "v1"},
	} {
		assert.Equal(t, c.want, joinVersions(c.from, c.more), "%s then %v", c.from, c.more)
	}
}
