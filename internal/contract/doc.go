// Package contract is simlock's one typed contract: the operations every
// frontend calls, their inputs and results, the progress a waiting requester
// sees, the event envelope, the error codes with their CLI exit codes and HTTP
// statuses, and the newline-delimited JSON frames of the daemon protocol.
//
// Everything here is plain data and pure validation: no I/O, no clocks. All of
// it is safe for concurrent use; values are not shared mutable state.
package contract
