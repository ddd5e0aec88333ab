// Package depcheck holds tailroot's dependency rules — which package may
// never import which — and the checker that applies them to the module's
// import graph. Its test lists the module with `go list` and fails on any
// edge a rule forbids; docs/architecture.md shows the same table.
//
// In: a Graph (each package's imports, test imports apart) and the Rules.
// Out: the Violations, one per forbidden edge, naming the rule's reason.
// What holds: a rule names packages by module-relative path prefix by whole
// segments ("api" is api and api/…, never apiserver); an Exception lets one
// exact edge through and says why, and one that no longer matches is
// reported so it is removed.
package depcheck
