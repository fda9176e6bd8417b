// Package lb is the load-balancing model: plain, immutable values for
// addresses, service names, services, frontends and backends, with their
// parsing, validation and printing. It does no I/O.
//
// Everything here is a value: copy it freely, compare it with ==, use it as a
// map or index key. Parse and String are inverses, and a zero value means
// "invalid" or "unset", never a real address or name.
package lb
