package core

// DownloadAllowed says whether a request may download the runtime it needs,
// under downloads.policy: "always" downloads whatever the request says,
// "never" never does, and "on-request" (the default) only when the request
// allows it (allowDownload). A worker's engine asks it before it parks a
// request on an install; a gateway asks it before it routes a request to a
// worker that would have to download.
func DownloadAllowed(policy string, allowDownload bool) bool {
	switch policy {
	case "never":
		return false
	case "always":
		return true
	}
	return allowDownload
}
