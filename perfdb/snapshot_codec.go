package perfdb

// snapshot_codec.go encodes a *Data as a compact, deterministic byte string and
// decodes it back, generically over the Data struct: every field that is a
// slice of flat structs (fields of string, integer, float or bool kinds — every
// perf table and Sources) is stored column by column, strings through a
// per-column dictionary (a table has a handful of distinct dtypes and kernel
// names, so decoded rows share their strings), integers and dictionary indexes
// little-endian in the narrowest of 1, 2, 4 or 8 bytes that holds the whole
// column, floats as their IEEE-754 bits; every other field (the system spec, the
// backend and version names) is stored as JSON. A table added to Data is
// therefore snapshotted without touching this file. The layout is described
// by dataLayout, which keys the snapshot, so a changed Data type never decodes
// an old snapshot.
//
// Decoding writes the fields of each row through their offsets (unsafe), one
// typed store per cell: the warm load path of LoadStore is this loop, and
// reflect's per-cell setters would cost several times more.

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"unsafe"
)

// Field encodings of the snapshot payload.
const (
	fieldColumns byte = 'C' // slice of flat structs, column by column
	fieldJSON    byte = 'J' // anything else, as JSON
)

var dataType = reflect.TypeFor[Data]()

// flatStruct reports whether t is a struct whose fields all have a kind the
// column codec stores (string, bool, sized or unsized ints and uints, floats).
func flatStruct(t reflect.Type) bool {
	if t.Kind() != reflect.Struct || t.NumField() == 0 {
		return false
	}
	for i := range t.NumField() {
		if !columnKind(t.Field(i).Type.Kind()) {
			return false
		}
	}
	return true
}

func columnKind(k reflect.Kind) bool {
	switch k {
	case reflect.String, reflect.Bool,
		reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64,
		reflect.Float32, reflect.Float64:
		return true
	}
	return false
}

// columnar reports whether a Data field is stored column by column.
func columnar(f reflect.StructField) bool {
	return f.Type.Kind() == reflect.Slice && flatStruct(f.Type.Elem())
}

// dataLayout describes the Data type as the codec sees it: every field's name
// and encoding, and for columnar fields every row field's name, kind, offset
// and size. Part of the snapshot key.
func dataLayout() string {
	var b strings.Builder
	for i := range dataType.NumField() {
		f := dataType.Field(i)
		if !columnar(f) {
			fmt.Fprintf(&b, "%s J %s;", f.Name, f.Type)
			continue
		}
		e := f.Type.Elem()
		fmt.Fprintf(&b, "%s C %s %d{", f.Name, e, e.Size())
		for j := range e.NumField() {
			g := e.Field(j)
			fmt.Fprintf(&b, "%s %s %d;", g.Name, g.Type.Kind(), g.Offset)
		}
		b.WriteString("};")
	}
	return b.String()
}

// encodeData appends the snapshot payload of d to dst.
func encodeData(dst []byte, d *Data) ([]byte, error) {
	v := reflect.ValueOf(d).Elem()
	dst = binary.AppendUvarint(dst, uint64(dataType.NumField()))
	for i := range dataType.NumField() {
		f := dataType.Field(i)
		if columnar(f) {
			dst = append(dst, fieldColumns)
			dst = encodeColumns(dst, v.Field(i))
			continue
		}
		b, err := json.Marshal(v.Field(i).Interface())
		if err != nil {
			return nil, fmt.Errorf("snapshot: encode %s: %w", f.Name, err)
		}
		dst = append(dst, fieldJSON)
		dst = binary.AppendUvarint(dst, uint64(len(b)))
		dst = append(dst, b...)
	}
	return dst, nil
}

// cell returns the address of field off of row i of a slice starting at base.
func cell(base unsafe.Pointer, size uintptr, i int, off uintptr) unsafe.Pointer {
	return unsafe.Add(base, uintptr(i)*size+off)
}

// encodeColumns appends a slice of flat structs: 0 for a nil slice, else its
// length + 1, then each field as one column in declaration order.
func encodeColumns(dst []byte, s reflect.Value) []byte {
	if s.IsNil() {
		return append(dst, 0)
	}
	n := s.Len()
	dst = binary.AppendUvarint(dst, uint64(n)+1)
	if n == 0 {
		return dst
	}
	e := s.Type().Elem()
	base, size := s.UnsafePointer(), e.Size()
	for j := range e.NumField() {
		f := e.Field(j)
		off := f.Offset
		switch f.Type.Kind() {
		case reflect.String:
			dict := map[string]uint64{}
			var order []string
			idx := make([]uint64, n)
			for i := range n {
				str := *(*string)(cell(base, size, i, off))
				k, ok := dict[str]
				if !ok {
					k = uint64(len(order))
					dict[str] = k
					order = append(order, str)
				}
				idx[i] = k
			}
			dst = binary.AppendUvarint(dst, uint64(len(order)))
			for _, str := range order {
				dst = binary.AppendUvarint(dst, uint64(len(str)))
				dst = append(dst, str...)
			}
			dst = appendFixed(dst, idx, false)
		case reflect.Bool:
			for i := range n {
				if *(*bool)(cell(base, size, i, off)) {
					dst = append(dst, 1)
				} else {
					dst = append(dst, 0)
				}
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			col := make([]uint64, n)
			for i := range n {
				col[i] = uint64(loadInt(cell(base, size, i, off), f.Type.Kind()))
			}
			dst = appendFixed(dst, col, true)
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			col := make([]uint64, n)
			for i := range n {
				col[i] = loadUint(cell(base, size, i, off), f.Type.Kind())
			}
			dst = appendFixed(dst, col, false)
		case reflect.Float32:
			for i := range n {
				dst = binary.LittleEndian.AppendUint32(dst, math.Float32bits(*(*float32)(cell(base, size, i, off))))
			}
		case reflect.Float64:
			for i := range n {
				dst = binary.LittleEndian.AppendUint64(dst, math.Float64bits(*(*float64)(cell(base, size, i, off))))
			}
		}
	}
	return dst
}

// fixedWidth is the narrowest of 1, 2, 4, 8 bytes holding every value of col
// (as two's-complement signed values when signed).
func fixedWidth(col []uint64, signed bool) int {
	w := 1
	for _, v := range col {
		for w < 8 {
			var fits bool
			if signed {
				x, bits := int64(v), uint(8*w)
				fits = x >= -1<<(bits-1) && x < 1<<(bits-1)
			} else {
				fits = v < 1<<uint(8*w)
			}
			if fits {
				break
			}
			w *= 2
		}
	}
	return w
}

// appendFixed appends the column's width byte, then each value little-endian
// in that width.
func appendFixed(dst []byte, col []uint64, signed bool) []byte {
	w := fixedWidth(col, signed)
	dst = append(dst, byte(w))
	for _, v := range col {
		switch w {
		case 1:
			dst = append(dst, byte(v))
		case 2:
			dst = binary.LittleEndian.AppendUint16(dst, uint16(v))
		case 4:
			dst = binary.LittleEndian.AppendUint32(dst, uint32(v))
		default:
			dst = binary.LittleEndian.AppendUint64(dst, v)
		}
	}
	return dst
}

func loadInt(p unsafe.Pointer, k reflect.Kind) int64 {
	switch k {
	case reflect.Int8:
		return int64(*(*int8)(p))
	case reflect.Int16:
		return int64(*(*int16)(p))
	case reflect.Int32:
		return int64(*(*int32)(p))
	case reflect.Int64:
		return *(*int64)(p)
	}
	return int64(*(*int)(p))
}

func loadUint(p unsafe.Pointer, k reflect.Kind) uint64 {
	switch k {
	case reflect.Uint8:
		return uint64(*(*uint8)(p))
	case reflect.Uint16:
		return uint64(*(*uint16)(p))
	case reflect.Uint32:
		return uint64(*(*uint32)(p))
	case reflect.Uint64:
		return *(*uint64)(p)
	}
	return uint64(*(*uint)(p))
}

// errSnapshotCorrupt marks a payload that does not decode: the caller
// rebuilds the snapshot from the sources.
var errSnapshotCorrupt = errors.New("snapshot: corrupt payload")

// snapReader reads a payload with bounds checks; the first failure sticks.
type snapReader struct {
	b   []byte
	err error
}

func (r *snapReader) fail() {
	if r.err == nil {
		r.err = errSnapshotCorrupt
	}
	r.b = nil
}

func (r *snapReader) uvarint() uint64 {
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.fail()
		return 0
	}
	r.b = r.b[n:]
	return v
}

// count reads a length that must not exceed the bytes left (every counted
// item takes at least one byte), so a corrupt length cannot allocate much.
func (r *snapReader) count() int {
	v := r.uvarint()
	if v > uint64(len(r.b)) {
		r.fail()
		return 0
	}
	return int(v)
}

func (r *snapReader) next(n int) []byte {
	if n < 0 || n > len(r.b) {
		r.fail()
		return nil
	}
	out := r.b[:n]
	r.b = r.b[n:]
	return out
}

func (r *snapReader) tag() byte {
	b := r.next(1)
	if b == nil {
		return 0
	}
	return b[0]
}

// decodeData decodes a payload written by encodeData for the same dataLayout.
func decodeData(payload []byte) (*Data, error) { return decodeDataSkipping(payload, nil) }

// decodeDataSkipping is decodeData leaving the columnar fields i with skip[i]
// nil: their columns are checked for bounds and passed over, not decoded.
func decodeDataSkipping(payload []byte, skip []bool) (*Data, error) {
	r := &snapReader{b: payload}
	d := &Data{}
	v := reflect.ValueOf(d).Elem()
	if r.uvarint() != uint64(dataType.NumField()) {
		r.fail()
	}
	for i := 0; i < dataType.NumField() && r.err == nil; i++ {
		f := dataType.Field(i)
		tag := r.tag()
		switch {
		case tag == fieldColumns && columnar(f) && skip != nil && skip[i]:
			skipColumns(r, f.Type.Elem())
		case tag == fieldColumns && columnar(f):
			decodeColumns(r, v.Field(i))
		case tag == fieldJSON && !columnar(f):
			b := r.next(r.count())
			if r.err == nil {
				if err := json.Unmarshal(b, v.Field(i).Addr().Interface()); err != nil {
					r.fail()
				}
			}
		default:
			r.fail()
		}
	}
	if r.err == nil && len(r.b) != 0 {
		r.fail()
	}
	if r.err != nil {
		return nil, r.err
	}
	return d, nil
}

// snapColumn is one parsed column of a slice field: where each row's value is
// (off, kind) and where the column's values are (data, w bytes each; dict
// for strings).
type snapColumn struct {
	off  uintptr
	kind reflect.Kind
	w    int
	data []byte
	dict []string
}

// decodeBlock is the rows decoded column by column at a time: a block of
// rows stays in cache across its columns (decoding whole columns one after
// the other walks the whole table once per field).
const decodeBlock = 256

// decodeColumns fills the slice field s from its columns.
func decodeColumns(r *snapReader, s reflect.Value) {
	n1 := r.uvarint()
	if r.err != nil || n1 == 0 {
		return // a nil slice
	}
	if n1-1 > uint64(len(r.b)) {
		r.fail()
		return
	}
	n := int(n1 - 1)
	e := s.Type().Elem()
	if n == 0 {
		s.Set(reflect.MakeSlice(s.Type(), 0, 0)) // empty, not nil
		return
	}
	cols := make([]snapColumn, e.NumField())
	for j := range cols {
		f := e.Field(j)
		c := &cols[j]
		c.off, c.kind = f.Offset, f.Type.Kind()
		c.dict, c.w = r.columnHeader(c.kind, true)
		c.data = r.next(c.w * n)
		if r.err != nil {
			return
		}
	}
	sv := reflect.MakeSlice(s.Type(), n, n)
	base, size := sv.UnsafePointer(), e.Size()
	for lo := 0; lo < n; lo += decodeBlock {
		hi := min(n, lo+decodeBlock)
		for j := range cols {
			if !cols[j].decode(base, size, lo, hi) {
				r.fail()
				return
			}
		}
	}
	s.Set(sv)
}

// skipColumns passes over the columns of a slice field of element type e,
// as decodeColumns reads them, without building its rows.
func skipColumns(r *snapReader, e reflect.Type) {
	n1 := r.uvarint()
	if r.err != nil || n1 <= 1 {
		return // nil or empty
	}
	if n1-1 > uint64(len(r.b)) {
		r.fail()
		return
	}
	n := int(n1 - 1)
	for j := 0; j < e.NumField() && r.err == nil; j++ {
		_, w := r.columnHeader(e.Field(j).Type.Kind(), false)
		r.next(w * n)
	}
}

// columnHeader reads the header of one column of kind k as encodeColumns wrote
// it — a string column's dictionary (returned when keep), then the value width
// in bytes (fixed for bools and floats) — leaving r at the column's values.
func (r *snapReader) columnHeader(k reflect.Kind, keep bool) (dict []string, w int) {
	switch k {
	case reflect.String:
		n := r.count()
		if keep {
			dict = make([]string, n)
		}
		for i := range n {
			b := r.next(r.count())
			if keep {
				dict[i] = string(b)
			}
		}
		return dict, r.width()
	case reflect.Bool:
		return nil, 1
	case reflect.Float32:
		return nil, 4
	case reflect.Float64:
		return nil, 8
	}
	return nil, r.width()
}

// width reads an integer column's value width (1, 2, 4 or 8 bytes).
func (r *snapReader) width() int {
	w := int(r.tag())
	if w != 1 && w != 2 && w != 4 && w != 8 {
		r.fail()
	}
	return w
}

// at returns value i of the column, zero-extended from its width.
func (c *snapColumn) at(i int) uint64 {
	switch c.w {
	case 1:
		return uint64(c.data[i])
	case 2:
		return uint64(binary.LittleEndian.Uint16(c.data[2*i:]))
	case 4:
		return uint64(binary.LittleEndian.Uint32(c.data[4*i:]))
	}
	return binary.LittleEndian.Uint64(c.data[8*i:])
}

// signedAt returns value i of the column, sign-extended from its width.
func (c *snapColumn) signedAt(i int) int64 {
	switch c.w {
	case 1:
		return int64(int8(c.data[i]))
	case 2:
		return int64(int16(binary.LittleEndian.Uint16(c.data[2*i:])))
	case 4:
		return int64(int32(binary.LittleEndian.Uint32(c.data[4*i:])))
	}
	return int64(binary.LittleEndian.Uint64(c.data[8*i:]))
}

// decode stores rows [lo, hi) of the column into the rows at base; false
// when a string index is out of its dictionary.
func (c *snapColumn) decode(base unsafe.Pointer, size uintptr, lo, hi int) bool {
	switch c.kind {
	case reflect.String:
		for i := lo; i < hi; i++ {
			x := c.at(i)
			if x >= uint64(len(c.dict)) {
				return false
			}
			*(*string)(cell(base, size, i, c.off)) = c.dict[x]
		}
	case reflect.Bool:
		for i := lo; i < hi; i++ {
			*(*bool)(cell(base, size, i, c.off)) = c.data[i] != 0
		}
	case reflect.Int:
		if c.w == 8 {
			for i := lo; i < hi; i++ {
				*(*int)(cell(base, size, i, c.off)) = int(binary.LittleEndian.Uint64(c.data[8*i:]))
			}
			break
		}
		for i := lo; i < hi; i++ {
			*(*int)(cell(base, size, i, c.off)) = int(c.signedAt(i))
		}
	case reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		for i := lo; i < hi; i++ {
			storeInt(cell(base, size, i, c.off), c.kind, c.signedAt(i))
		}
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		for i := lo; i < hi; i++ {
			storeUint(cell(base, size, i, c.off), c.kind, c.at(i))
		}
	case reflect.Float32:
		for i := lo; i < hi; i++ {
			*(*float32)(cell(base, size, i, c.off)) = math.Float32frombits(binary.LittleEndian.Uint32(c.data[4*i:]))
		}
	case reflect.Float64:
		for i := lo; i < hi; i++ {
			*(*float64)(cell(base, size, i, c.off)) = math.Float64frombits(binary.LittleEndian.Uint64(c.data[8*i:]))
		}
	}
	return true
}

func storeInt(p unsafe.Pointer, k reflect.Kind, v int64) {
	switch k {
	case reflect.Int8:
		*(*int8)(p) = int8(v)
	case reflect.Int16:
		*(*int16)(p) = int16(v)
	case reflect.Int32:
		*(*int32)(p) = int32(v)
	case reflect.Int64:
		*(*int64)(p) = v
	default:
		*(*int)(p) = int(v)
	}
}

func storeUint(p unsafe.Pointer, k reflect.Kind, v uint64) {
	switch k {
	case reflect.Uint8:
		*(*uint8)(p) = uint8(v)
	case reflect.Uint16:
		*(*uint16)(p) = uint16(v)
	case reflect.Uint32:
		*(*uint32)(p) = uint32(v)
	case reflect.Uint64:
		*(*uint64)(p) = v
	default:
		*(*uint)(p) = uint(v)
	}
}
