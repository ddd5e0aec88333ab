package tsdb

import "time"

// defaultHeadMMapInterval is how often full head chunks are moved out of
// the heap when Options.HeadMMapInterval is zero.
const defaultHeadMMapInterval = 5 * time.Second

// startHeadMMap starts the loop that writes full head chunks to the head
// chunk files sooner than the Prometheus DB does by itself.
//
// A series' full chunks stay on the heap until they are written to the
// m-mapped head chunk files, and the Prometheus DB does that once a minute
// (with its block reload). At a scrape's pace that is a chunk or so per
// series, but a remote-write backlog, an agent draining its disk queue or
// `tailroot import` writes hours of samples in seconds: every series cuts a
// chunk every 120 samples, and all of them wait on the heap for the minute
// to end. On 51,200 series given two hours in 34 s that was 76 MB of a
// 146 MB live heap, and the collector's goal grows with it. Writing them
// out takes a look at one counter per stripe when nothing is ready, so the
// loop runs every few seconds; the DB's own minute still runs too (a
// second writer finds nothing left: the work is done under each series'
// lock). While writes are refused for lack of space it waits: the head
// chunk files are on the same disk.
func (db *DB) startHeadMMap() {
	every := db.opts.HeadMMapInterval
	if every < 0 {
		return
	}
	if every == 0 {
		every = defaultHeadMMapInterval
	}
	db.bg.Add(1)
	go func() {
		defer db.bg.Done()
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-db.stopc:
				return
			case <-t.C:
			}
			db.mmapHeadChunks()
		}
	}()
}

// mmapHeadChunks writes every series' full head chunks to the head chunk
// files, unless writes are refused or the DB is being reopened.
func (db *DB) mmapHeadChunks() {
	if db.w.refuse.Load() != nil {
		return
	}
	pdb, _, release, err := db.lease()
	if err != nil {
		return
	}
	defer release()
	pdb.ForceHeadMMap()
}
