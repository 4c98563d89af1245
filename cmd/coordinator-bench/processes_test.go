package main

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseStatCPU(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		stat    string
		want    time.Duration
		wantErr bool
	}{
		{
			name: "plain name",
			stat: "1234 (coordinator) S 1 1234 1234 0 -1 4194560 5000 0 0 0 250 130 0 0 20 0 8 0 100 0 0",
			want: 3800 * time.Millisecond,
		},
		{
			name: "name with spaces and parentheses",
			stat: "99 (a) b (c) R 1 99 99 0 -1 0 0 0 0 0 7 3 0 0 20 0 1 0 5 0 0",
			want: 100 * time.Millisecond,
		},
		{name: "no name", stat: "99 a R 1", wantErr: true},
		{name: "short", stat: "99 (a) R 1 2 3", wantErr: true},
		{name: "not a number", stat: "1 (a) S 1 1 1 0 -1 0 0 0 0 0 x 3 0", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseStatCPU([]byte(tt.stat))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}

func TestParseIOSyscalls(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		io      string
		want    int64
		wantErr bool
	}{
		{
			name: "linux layout",
			io:   "rchar: 100\nwchar: 200\nsyscr: 12\nsyscw: 30\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n",
			want: 42,
		},
		{name: "missing syscw", io: "syscr: 12\n", wantErr: true},
		{name: "not a number", io: "syscr: x\nsyscw: 1\n", wantErr: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := parseIOSyscalls([]byte(tt.io))
			if tt.wantErr {
				require.Error(t, err)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, tt.want, got)
		})
	}
}
