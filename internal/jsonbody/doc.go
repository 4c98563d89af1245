// Package jsonbody reads and edits the members of a client's JSON request body
// without decoding it into map[string]any and without re-encoding what it does
// not change.
//
// [ParseObject] validates the whole document in one pass (same accept/reject
// decisions as encoding/json.Valid, plus a [MaxDepth] nesting limit and UTF-8
// validation of strings) and indexes
// the top-level members. Member values are raw JSON text that aliases the input;
// a step reads the few keys it owns with [Object.Get] and the typed readers
// ([String], [Int], [Bool], [Uint32s], ...), replaces them with [Object.Set] and
// writes the body back with [Object.AppendTo], which copies every member it did
// not touch byte for byte. Nested objects are edited the same way: parse the
// member's raw value with [ParseObject] and Set the result's Bytes.
//
// A reader that knows the shape it expects and reads many documents (a
// worker's answers and stream events) reads them with a [Scanner] instead,
// value by value into its own types in one pass, nothing indexed.
//
// Strings are scanned eight bytes at a time, so multi-megabyte base64 image
// payloads cost little more than a memory scan.
package jsonbody
