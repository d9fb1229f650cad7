package perfdb

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"math"
	"strings"

	"github.com/parquet-go/parquet-go"
)

// column is one decoded Parquet column. Exactly one of ints, floats, strs is
// set, by the column's physical type; null marks null values (nil if none).
type column struct {
	ints   []int64
	floats []float64
	strs   []string
	null   []bool
	intern map[string]string // dedupes the few distinct dtype/kernel names
	rows   int               // capacity to allocate on first use
}

// rawTable is a flat Parquet file read column by column, by name: aiconfigurator
// writes the same table with different column orders per framework
// (PERFDB.md §1.2), so nothing here depends on position.
type rawTable struct {
	name string // the file, for error messages
	rows int
	cols map[string]*column
}

// maxParquetRows bounds the rows of one table (the largest aiconfigurator
// table has ~166k), so a corrupt footer cannot make the reader allocate
// without bound.
const maxParquetRows = 1 << 22

// readParquet reads the named columns of a flat Parquet file. Columns in want
// that the file lacks are simply absent from the result (callers decide which
// are required). name is used in errors.
func readParquet(name string, data []byte, want []string) (t *rawTable, err error) {
	defer func() {
		// parquet-go may panic on malformed footers; report them as errors.
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("parquet file %s: corrupt: %s", name, strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	f, err := parquet.OpenFile(bytes.NewReader(data), int64(len(data)), parquet.SkipBloomFilters(true))
	if err != nil {
		return nil, fmt.Errorf("parquet file %s: cannot open: %w", name, err)
	}
	t = &rawTable{name: name, rows: int(f.NumRows()), cols: map[string]*column{}}
	if t.rows < 0 || t.rows > maxParquetRows {
		return nil, fmt.Errorf("parquet file %s: declares %d rows; aicdb reads tables of 0..%d rows", name, t.rows, maxParquetRows)
	}
	schema := f.Schema()
	for _, cn := range want {
		leaf, ok := schema.Lookup(cn)
		if !ok {
			continue
		}
		if leaf.MaxRepetitionLevel > 0 {
			return nil, fmt.Errorf("parquet file %s: column %s is repeated; want a flat table", name, cn)
		}
		c, err := readColumn(f, leaf.ColumnIndex, t.rows)
		if err != nil {
			return nil, fmt.Errorf("parquet file %s: column %s: %w", name, cn, err)
		}
		t.cols[cn] = c
	}
	return t, nil
}

// readColumn decodes every page of one leaf column across row groups.
func readColumn(f *parquet.File, idx, rows int) (c *column, err error) {
	defer func() {
		// parquet-go may panic on some malformed inputs; report them as errors.
		if r := recover(); r != nil {
			c, err = nil, fmt.Errorf("corrupt data: %s", strings.Join(strings.Fields(fmt.Sprint(r)), " "))
		}
	}()
	c = &column{rows: rows}
	kind := parquet.Kind(-1)
	n := 0
	buf := make([]parquet.Value, 4096)
	for _, rg := range f.RowGroups() {
		chunks := rg.ColumnChunks()
		if idx >= len(chunks) {
			return nil, errors.New("missing column chunk")
		}
		pages := chunks[idx].Pages()
		for {
			p, err := pages.ReadPage()
			if err == io.EOF {
				break
			}
			if err != nil {
				pages.Close()
				return nil, err
			}
			vr := p.Values()
			for {
				k, err := vr.ReadValues(buf)
				for _, v := range buf[:k] {
					if n >= rows {
						pages.Close()
						return nil, fmt.Errorf("more values than the %d rows the footer declares", rows)
					}
					if err := c.add(&kind, v, n); err != nil {
						pages.Close()
						return nil, err
					}
					n++
				}
				if err == io.EOF {
					break
				}
				if err != nil {
					pages.Close()
					return nil, err
				}
				if k == 0 {
					break
				}
			}
			parquet.Release(p)
		}
		if err := pages.Close(); err != nil {
			return nil, err
		}
	}
	if n != rows {
		return nil, fmt.Errorf("read %d values, the footer declares %d rows", n, rows)
	}
	return c, nil
}

// add appends value v (row n) to the column, fixing the column's type on the
// first non-null value.
func (c *column) add(kind *parquet.Kind, v parquet.Value, n int) error {
	if v.IsNull() {
		if c.null == nil {
			c.null = make([]bool, n, n+1)
		}
		c.null = append(c.null, true)
		switch {
		case c.ints != nil || *kind == parquet.Int32 || *kind == parquet.Int64:
			c.ints = append(c.ints, 0)
		case c.floats != nil || *kind == parquet.Double || *kind == parquet.Float:
			c.floats = append(c.floats, 0)
		case c.strs != nil || *kind == parquet.ByteArray:
			c.strs = append(c.strs, "")
		default: // type not known yet: remember nothing but the null
			c.ints = append(c.ints, 0)
		}
		return nil
	}
	if c.null != nil {
		c.null = append(c.null, false)
	}
	k := v.Kind()
	if *kind == parquet.Kind(-1) {
		*kind = k
		if n == 0 { // preallocate the column: appends then never copy
			switch k {
			case parquet.Int32, parquet.Int64:
				c.ints = make([]int64, 0, c.rows)
			case parquet.Double, parquet.Float:
				c.floats = make([]float64, 0, c.rows)
			case parquet.ByteArray, parquet.FixedLenByteArray:
				c.strs = make([]string, 0, c.rows)
			}
		}
	}
	switch k {
	case parquet.Int32:
		c.ints = append(c.ints, int64(v.Int32()))
	case parquet.Int64:
		c.ints = append(c.ints, v.Int64())
	case parquet.Double:
		if c.floats == nil && len(c.ints) > 0 { // leading nulls were parked as ints
			c.floats, c.ints = make([]float64, len(c.ints)), nil
		}
		c.floats = append(c.floats, v.Double())
	case parquet.Float:
		if c.floats == nil && len(c.ints) > 0 {
			c.floats, c.ints = make([]float64, len(c.ints)), nil
		}
		c.floats = append(c.floats, float64(v.Float()))
	case parquet.ByteArray, parquet.FixedLenByteArray:
		if c.strs == nil && len(c.ints) > 0 {
			c.strs, c.ints = make([]string, len(c.ints)), nil
		}
		b := v.ByteArray()
		str, ok := c.intern[string(b)]
		if !ok {
			if c.intern == nil {
				c.intern = map[string]string{}
			}
			str = string(b)
			c.intern[str] = str
		}
		c.strs = append(c.strs, str)
	default:
		return fmt.Errorf("unsupported physical type %v", k)
	}
	if (k == parquet.Int32 || k == parquet.Int64) != (*kind == parquet.Int32 || *kind == parquet.Int64) {
		return fmt.Errorf("mixed value types %v and %v", *kind, k)
	}
	return nil
}

func (c *column) isNull(i int) bool { return c.null != nil && c.null[i] }

// ints returns an integer column. Float columns holding integral values are
// accepted (pandas writes ints as doubles when a column had NaNs). A required
// column that is absent or holds nulls is an error; an optional absent column
// yields def for every row, and nulls in it yield def.
func (t *rawTable) ints(name string, required bool, def int) ([]int, error) {
	out := make([]int, t.rows)
	c, ok := t.cols[name]
	if !ok {
		if required {
			return nil, fmt.Errorf("parquet file %s: missing column %s", t.name, name)
		}
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	for i := range out {
		if c.isNull(i) {
			if required {
				return nil, fmt.Errorf("parquet file %s: column %s row %d is null", t.name, name, i)
			}
			out[i] = def
			continue
		}
		switch {
		case c.ints != nil:
			v := c.ints[i]
			if v < -(1<<40) || v > 1<<40 {
				return nil, fmt.Errorf("parquet file %s: column %s row %d: %d out of range", t.name, name, i, v)
			}
			out[i] = int(v)
		case c.floats != nil:
			v := c.floats[i]
			if v != math.Trunc(v) || math.Abs(v) > 1<<40 {
				return nil, fmt.Errorf("parquet file %s: column %s row %d: %v is not an integer", t.name, name, i, v)
			}
			out[i] = int(v)
		default:
			return nil, fmt.Errorf("parquet file %s: column %s is not numeric", t.name, name)
		}
	}
	return out, nil
}

// floats returns a float column (ints are converted). Values must be finite;
// nulls are errors in a required column and def otherwise.
func (t *rawTable) floats(name string, required bool, def float64) ([]float64, error) {
	out := make([]float64, t.rows)
	c, ok := t.cols[name]
	if !ok {
		if required {
			return nil, fmt.Errorf("parquet file %s: missing column %s", t.name, name)
		}
		for i := range out {
			out[i] = def
		}
		return out, nil
	}
	for i := range out {
		if c.isNull(i) {
			if required {
				return nil, fmt.Errorf("parquet file %s: column %s row %d is null", t.name, name, i)
			}
			out[i] = def
			continue
		}
		switch {
		case c.floats != nil:
			out[i] = c.floats[i]
		case c.ints != nil:
			out[i] = float64(c.ints[i])
		default:
			return nil, fmt.Errorf("parquet file %s: column %s is not numeric", t.name, name)
		}
		if math.IsNaN(out[i]) || math.IsInf(out[i], 0) {
			if !required {
				out[i] = def
				continue
			}
			return nil, fmt.Errorf("parquet file %s: column %s row %d is %v", t.name, name, i, out[i])
		}
	}
	return out, nil
}

// strs returns a string column; absent optional columns and nulls yield "".
func (t *rawTable) strs(name string, required bool) ([]string, error) {
	c, ok := t.cols[name]
	if !ok {
		if required {
			return nil, fmt.Errorf("parquet file %s: missing column %s", t.name, name)
		}
		return make([]string, t.rows), nil
	}
	if c.strs == nil {
		if c.ints != nil && c.null != nil && allTrue(c.null) { // all-null column
			return make([]string, t.rows), nil
		}
		return nil, fmt.Errorf("parquet file %s: column %s is not a string column", t.name, name)
	}
	if required && c.null != nil {
		for i, isNull := range c.null {
			if isNull {
				return nil, fmt.Errorf("parquet file %s: column %s row %d is null", t.name, name, i)
			}
		}
	}
	return c.strs, nil
}

func allTrue(b []bool) bool {
	for _, v := range b {
		if !v {
			return false
		}
	}
	return true
}
