// Package api is the read API lbctl uses, for an embedder to mount on
// their own HTTP server: StateDB's HTTP API over the tables under
// /statedb/ (dumps, queries, and the change streams that lbctl --watch
// follows), a table's rows by a query in text at /rows/ (RowsPath: the
// server builds the index key, so a client of another build cannot miss
// rows by sending keys this one reads otherwise; every answer names
// ReadAPIVersion, and a client of another version is refused, saying
// so) and the maps' dump at /maps (what lbctl maps and explain read
// when they cannot open the pinned maps), with every Maglev table whole at
// /maps/maglev; RegisterAgent adds what the agent is (its version and
// flags in force at /agent, its metrics at /metrics): all lbctl dump
// reads.
//
// Register mounts it on an *http.ServeMux; Handler is the same as one
// http.Handler, to mount under a prefix with http.StripPrefix (lbctl
// --api then names the prefix: http://HOST:PORT/PREFIX). Any local user
// may connect to such a server, so every request runs within Limits:
// deadlines per request rather than per server (a watch lasts as long as
// its user wants), caps on bodies, Maglev tables and requests in flight,
// and a handler's failure answered with one log line instead of a stack
// trace. A server for the API sets no WriteTimeout (it would cut every
// watch); its connection-level timeouts are the embedder's.
package api
