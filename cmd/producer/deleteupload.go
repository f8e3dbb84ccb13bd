package main

import (
	"context"
	"errors"
	"fmt"

	"github.com/bulkreg/bulkreg"
	"github.com/bulkreg/bulkreg/uploadstatus"
)

const deleteUploadDetails = `Deletes each upload ID of seller S from Redis: its status, its rows' results,
the cells its report needs, its place in the seller's history, and its part of
the seller's share, so a seller refused with 429 share_full has room at once.
Nothing registered is undone: products the upload registered stay registered.
The upload leaves a tombstone for --status-retention, charged to the seller's
share (under 150 bytes): a row of it that a consumer still records is dropped
and logged, not kept as an upload nothing is charged for. Sending the same
file again creates the upload again.

Prints "deleted ID" per upload deleted, then what the seller keeps now; an ID
that is not an upload of S (another seller's, expired, never made) is named on
stderr and the others are still deleted.

exit status: 0 every ID deleted; 1 some ID is not an upload of S, or Redis
failed; 2 bad flags or no ID.`

func cmdDeleteUpload(ctx context.Context, e *env, args []string) int {
	s := defaults()
	fs := e.flagSet("delete-upload")
	seller := fs.String("seller", "", "seller id the uploads belong to (required): an upload of another seller is not deleted")
	check := s.bind(fs, e.getenv, gRedis|gStatus)
	ids, code, ok := e.parseArgs(fs, args, atLeastOne, "one or more upload IDs", func() error {
		if *seller == "" {
			return errors.New("--seller is required: the seller id the uploads belong to")
		}
		if err := bulkreg.ValidSellerID(*seller); err != nil {
			return fmt.Errorf("--seller: %w", err)
		}
		return check()
	})
	if !ok {
		return code
	}
	rdb := s.redis()
	defer rdb.Close()
	store := uploadstatus.New(rdb, s.statusRetention)
	code = exitOK
	for _, id := range ids {
		err := store.Delete(ctx, *seller, id)
		switch {
		case errors.Is(err, uploadstatus.ErrNotFound):
			code = e.errorf("no upload %q of seller %q (another seller's, older than --status-retention, or never made): not deleted", id, *seller)
		case err != nil:
			return e.errorf("%v", err)
		default:
			fmt.Fprintf(e.stdout, "deleted %s\n", id)
		}
	}
	if u, err := store.Usage(ctx, *seller); err == nil {
		fmt.Fprintf(e.stdout, "seller %q keeps %s, %d bytes, in Redis now\n", *seller, count(u.Uploads, "upload"), u.Bytes)
	}
	return code
}
