package jsonbody_test

import (
	"fmt"
	"strconv"

	"github.com/coordinator-project/coordinator/internal/jsonbody"
)

// A step caps max_tokens, switches streaming off and attaches token IDs;
// every other member is forwarded byte for byte.
func Example() {
	body := []byte(`{"model":"m", "prompt":"hi", "max_tokens":4096.0, "stream":true, "top_k":20}`)
	o, err := jsonbody.ParseObject(body)
	if err != nil {
		fmt.Println(err)
		return
	}
	if raw, ok := o.Get("max_tokens"); ok {
		if n, ok := jsonbody.Int(raw); ok && n > 1024 {
			o.Set("max_tokens", strconv.AppendInt(nil, 1024, 10))
		}
	}
	o.Set("stream", []byte("false"))
	o.Set("prompt_token_ids", jsonbody.AppendUint32s(nil, []uint32{15339, 1917}))
	fmt.Println(string(o.Bytes()))
	// Output: {"model":"m","prompt":"hi","max_tokens":1024,"stream":false,"top_k":20,"prompt_token_ids":[15339,1917]}
}

func ExampleObject_Get() {
	o, _ := jsonbody.ParseObject([]byte(`{"user":"a","user":"b"}`))
	raw, _ := o.Get("user")
	s, _ := jsonbody.String(raw)
	dup, _ := o.DuplicateKey()
	fmt.Println(s, dup)
	// Output: b user
}
