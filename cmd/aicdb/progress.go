package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/urfave/cli/v2"
	"golang.org/x/term"
)

// Progress reporting defaults.
const (
	// progressInterval is how often a progress line is printed without a terminal.
	progressInterval = 5 * time.Second
	// progressRedraw is how often the line is redrawn on a terminal.
	progressRedraw = 250 * time.Millisecond
	// bigWork is the size (items) above which the work is stated before it starts.
	bigWork = 100_000
)

// quietFlag is the --quiet flag of commands that report progress.
func quietFlag() cli.Flag {
	return &cli.BoolFlag{Name: "quiet", Usage: "no progress lines on stderr"}
}

// progressReporter reports the progress of long work (done of total items: sweeps
// now, imports and replays later) on w. Without a terminal it prints a line every
// interval: items done / total, rate and ETA; on a terminal it redraws one line in
// place. Work that ends within the first interval prints nothing, and work of more
// than bigWork items is stated (size, already done) at its first update, even when
// quiet. Update may be called from several goroutines; a nil reporter does nothing.
type progressReporter struct {
	w          io.Writer
	what, unit string // e.g. "sweep", "points"
	interval   time.Duration
	now        func() time.Time
	tty, quiet bool

	begun time.Time // when the reporter was made: the summary's wall time

	mu          sync.Mutex
	started     bool
	start, last time.Time
	base        int // items done at the first update (already stored): the rate counts new work only
	drawn       int // on a terminal: width of the line drawn (0: none)
}

// newProgress returns the reporter of command c's work: on c's stderr, silenced by
// --quiet, redrawn in place when stderr is a terminal.
func newProgress(c *cli.Context, what, unit string) *progressReporter {
	w := c.App.ErrWriter
	tty := false
	if f, ok := w.(*os.File); ok && term.IsTerminal(int(f.Fd())) {
		tty = true
	}
	return &progressReporter{w: w, what: what, unit: unit, interval: progressInterval, now: time.Now, begun: time.Now(), tty: tty, quiet: c.Bool("quiet")}
}

// Update reports done of total items.
func (p *progressReporter) Update(done, total int) {
	if p == nil || total <= 0 {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.now()
	if !p.started {
		p.started, p.start, p.last, p.base = true, now, now, done
		if total > bigWork {
			fmt.Fprintf(p.w, "aicdb: %s: %d %s, %d already done; progress on stderr every %v (--quiet silences it)\n",
				p.what, total, p.unit, done, p.interval)
		}
		return
	}
	if p.quiet {
		return
	}
	every := p.interval
	if p.tty {
		every = progressRedraw
	}
	if now.Sub(p.last) < every && !(p.tty && done == total) {
		return
	}
	p.last = now
	line := p.line(done, total, now)
	if !p.tty {
		fmt.Fprintf(p.w, "aicdb: %s\n", line)
		return
	}
	pad := max(p.drawn-len(line), 0)
	fmt.Fprintf(p.w, "\r%s%s", line, strings.Repeat(" ", pad))
	p.drawn = len(line)
}

// line formats done / total, the rate since the first update and the ETA.
func (p *progressReporter) line(done, total int, now time.Time) string {
	s := fmt.Sprintf("%s: %d/%d %s (%.1f%%)", p.what, done, total, p.unit, 100*float64(done)/float64(total))
	el := now.Sub(p.start).Seconds()
	if el <= 0 || done <= p.base {
		return s + ", ETA unknown"
	}
	rate := float64(done-p.base) / el
	eta := time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second)
	if rate >= 10 {
		return fmt.Sprintf("%s, %.0f %s/s, ETA %v", s, rate, p.unit, eta)
	}
	return fmt.Sprintf("%s, %.2f %s/s, ETA %v", s, rate, p.unit, eta)
}

// Done ends the terminal line; without a terminal there is nothing to end.
func (p *progressReporter) Done() {
	if p == nil {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.drawn > 0 {
		fmt.Fprintln(p.w)
		p.drawn = 0
	}
}

// Summary ends the work: it ends a terminal line and, unless quiet, prints one
// line with the counts (format and args) and the wall time since the reporter was
// made: "aicdb: trace replay conv: 120 requests, 0 unfinished; 1.3 s wall".
func (p *progressReporter) Summary(format string, args ...any) {
	if p == nil {
		return
	}
	p.Done()
	if p.quiet {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	wall := p.now().Sub(p.begun).Seconds()
	fmt.Fprintf(p.w, "aicdb: %s: %s; %.1f s wall\n", p.what, fmt.Sprintf(format, args...), max(wall, 0))
}

// importProgress reports a perf-data import file by file, one reporter per system
// ("perfdb import h200_sxm: 312/1,024 files …"); done closes every reporter.
func importProgress(c *cli.Context, what string) (update func(system string, done, total int), done func()) {
	bars := map[string]*progressReporter{}
	var order []string
	update = func(system string, d, total int) {
		b := bars[system]
		if b == nil {
			b = newProgress(c, what+" "+system, "files")
			bars[system] = b
			order = append(order, system)
		}
		b.Update(d, total)
	}
	done = func() {
		for _, s := range order {
			bars[s].Done()
		}
	}
	return update, done
}
