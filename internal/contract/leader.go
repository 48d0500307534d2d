package contract

// NotLeader is a gateway replica's refusal of what only the leader serves,
// as l, the leadership the replica last saw, names the leader: the one
// error every surface (the socket, the HTTP API, an uplink) answers with,
// so that a client retries, at the leader's URL when one is known.
func NotLeader(l Leadership) *Error {
	if l.LeaderURL == "" {
		return Errorf(CodeNotLeader, "this gateway replica does not lead and no leader is known yet; try again shortly").
			With("leaderUrl", "").With("term", l.Term)
	}
	return Errorf(CodeNotLeader, "this gateway replica does not lead; the leader is %s (term %d)", l.LeaderURL, l.Term).
		With("leaderUrl", l.LeaderURL).With("term", l.Term)
}
