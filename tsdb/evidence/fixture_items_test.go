package evidence

import "time"

// v1FixtureItems are the items of testdata/v1, a store written by the
// first file format (TREVID01 partition files): four items in two
// partitions.
func v1FixtureItems() []Item {
	items := []Item{
		stackItem("node-a", 100, "slowpath", t0.Add(1*time.Second), 0.050),
		stackItem("node-b", 101, "python3", t0.Add(2*time.Second), 0.200),
		timelineItem("node-a", 100, t0.Add(4*time.Second), time.Second, 2*time.Second),
		stackItem("node-a", 102, "slowpath", t0.Add(90*time.Minute), 0.070),
	}
	items[1].Probe = "syscalls"
	items[1].Detail = "futex"
	return items
}
