// Package design holds aicdb's specifications as Markdown beside this file, so a
// reader of the repository alone can follow every rule a comment cites:
//
//   - SCHEDULERS.md: the engines' iteration schedulers, rules numbered V-R*, V-P*,
//     V-D*, S-R*, T-R*, T-D*, M-R* (cited by the calendars, the oracle and the gate);
//   - QUEUEING.md: the pass-calendar model (tiers, tandem, funnel), by § number;
//   - PERFDB.md: aiconfigurator's perf data and its composition, by § number;
//   - ARCHITECTURE.md and GO_STACK.md: layout, interfaces and the storage stack.
//
// The package has no code; its test checks that every "FILE.md §N" and every rule
// id cited in a Go comment of the module resolves to a heading or rule here.
package design
