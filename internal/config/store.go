package config

import (
	"errors"
	"net/url"
)

// StoreSQLite is gateway.store's default: the embedded SQLite file in the
// home, as every worker and single daemon keeps.
const StoreSQLite = "sqlite"

// checkStore accepts gateway.store's values: sqlite, or a postgres:// (or
// postgresql://) URL naming a host. Its errors never repeat the value,
// which may carry a password.
func checkStore(s string) error {
	if s == StoreSQLite {
		return nil
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return errors.New("must be sqlite or a postgres:// URL")
	}
	if u.Host == "" {
		return errors.New("the postgres:// URL names no host")
	}
	return nil
}

// RedactStoreURL is a database URL as it may be shown: a password, in the
// URL's user part or in a password= parameter, replaced by xxxxx.
// Anything that is not a URL is shown as "(connection string)", since it
// may hold a password=… pair.
func RedactStoreURL(s string) string {
	if s == StoreSQLite {
		return s
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "postgres" && u.Scheme != "postgresql") {
		return "(connection string)"
	}
	q := u.Query()
	if q.Has("password") {
		q.Set("password", "xxxxx")
		u.RawQuery = q.Encode()
	}
	return u.Redacted()
}

// shown is v as config get and show print key's value.
func shown(spec keySpec, v any) any {
	if s, ok := v.(string); ok && spec.kind == kindStore {
		return RedactStoreURL(s)
	}
	return v
}
