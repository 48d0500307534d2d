package daemon

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"sort"
	"sync"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/ids"
	"github.com/simlock/simlock/internal/store"
)

// tokenPrefix starts every HTTP token secret, so a leaked one is easy to
// recognise (and to scan for).
const tokenPrefix = "slk_"

// tokenBook holds the HTTP bearer tokens: kept in the store, looked up in
// memory by the hash of their secret, so checking a request costs no
// database read.
type tokenBook struct {
	db store.GatewayStore

	// revokeMu serializes revocations: one whose delete fails puts its
	// token back, which must not undo another's delete of the same token.
	revokeMu sync.Mutex

	mu     sync.Mutex
	byHash map[string]contract.TokenRecord
	hashOf map[string]string // token id -> hash
}

func loadTokens(ctx context.Context, db store.GatewayStore) (*tokenBook, error) {
	all, err := db.Tokens(ctx)
	if err != nil {
		return nil, err
	}
	b := &tokenBook{db: db, byHash: map[string]contract.TokenRecord{}, hashOf: map[string]string{}}
	for _, t := range all {
		b.byHash[t.Hash] = t.TokenRecord
		b.hashOf[t.ID] = t.Hash
	}
	return b, nil
}

// reload replaces the tokens in memory with the store's: a gateway
// replica elected leader reads those its predecessor wrote.
func (b *tokenBook) reload(ctx context.Context) error {
	fresh, err := loadTokens(ctx, b.db)
	if err != nil {
		return err
	}
	b.revokeMu.Lock()
	defer b.revokeMu.Unlock()
	b.mu.Lock()
	defer b.mu.Unlock()
	b.byHash, b.hashOf = fresh.byHash, fresh.hashOf
	return nil
}

func hashSecret(secret string) string {
	h := sha256.Sum256([]byte(secret))
	return hex.EncodeToString(h[:])
}

func (b *tokenBook) create(ctx context.Context, in contract.TokenCreateInput) (contract.TokenCreateResult, error) {
	var raw [32]byte
	_, _ = rand.Read(raw[:])
	secret := tokenPrefix + base64.RawURLEncoding.EncodeToString(raw[:])
	t := store.Token{
		TokenRecord: contract.TokenRecord{ID: ids.New("tok_", ids.Short), Role: in.Role, Label: in.Label, CreatedAt: time.Now().UnixMilli()},
		Hash:        hashSecret(secret),
	}
	if err := b.db.PutToken(ctx, t); err != nil {
		return contract.TokenCreateResult{}, contract.Errorf(contract.CodeInternal, "store the token: %v", err)
	}
	b.mu.Lock()
	b.byHash[t.Hash] = t.TokenRecord
	b.hashOf[t.ID] = t.Hash
	b.mu.Unlock()
	return contract.TokenCreateResult{Token: t.TokenRecord, Secret: secret}, nil
}

func (b *tokenBook) list() []contract.TokenRecord {
	b.mu.Lock()
	out := make([]contract.TokenRecord, 0, len(b.byHash))
	for _, t := range b.byHash {
		out = append(out, t)
	}
	b.mu.Unlock()
	sort.Slice(out, func(i, j int) bool {
		if out[i].CreatedAt != out[j].CreatedAt {
			return out[i].CreatedAt < out[j].CreatedAt
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// revoke deletes a token; its next request is refused. It returns the
// token as it was, for the token.revoked event (zero when there was none).
// A delete that cannot be written changes nothing: the token is known
// again, as it is still stored.
func (b *tokenBook) revoke(ctx context.Context, id string) (contract.TokenRevokeResult, contract.TokenRecord, error) {
	b.revokeMu.Lock()
	defer b.revokeMu.Unlock()
	// Forget it first: from here on the secret no longer opens anything,
	// even while the delete is being written.
	b.mu.Lock()
	var was contract.TokenRecord
	h, known := b.hashOf[id]
	if known {
		was = b.byHash[h]
		delete(b.byHash, h)
		delete(b.hashOf, id)
	}
	b.mu.Unlock()
	ok, err := b.db.DeleteToken(ctx, id)
	if err != nil {
		if known {
			b.mu.Lock()
			b.byHash[h], b.hashOf[id] = was, h
			b.mu.Unlock()
		}
		return contract.TokenRevokeResult{}, was, contract.Errorf(contract.CodeInternal, "revoke the token: %v; nothing was changed, try again", err)
	}
	if was.ID == "" && ok {
		// Stored but not in memory cannot happen; the id is all there is.
		was.ID = id
	}
	return contract.TokenRevokeResult{Revoked: ok}, was, nil
}

// tokenEvent is the payload of token.created and token.revoked: the token
// as the list shows it (never its secret or hash) and who acted, by the
// principal of their session.
func tokenEvent(t contract.TokenRecord, by string) map[string]any {
	p := map[string]any{"tokenId": t.ID, "role": t.Role, "by": by}
	if t.Label != "" {
		p["label"] = t.Label
	}
	return p
}

func (b *tokenBook) lookup(secret string) (contract.TokenRecord, bool) {
	if len(secret) <= len(tokenPrefix) || len(secret) > 256 {
		return contract.TokenRecord{}, false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	t, ok := b.byHash[hashSecret(secret)]
	return t, ok
}
