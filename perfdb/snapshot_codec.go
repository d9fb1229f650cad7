package perfdb

// snapshot_codec.go encodes a *Data as a compact, deterministic byte string and
// decodes it back, generically over the Data struct: every field that is a
// slice of flat structs (fields of string, integer, float or bool kinds — every
// perf table and Sources) is stored column by column, strings through a
// per-column dictionary (a table has a handful of distinct dtypes and kernel
// names, so decoded rows share their strings), integers as zig-zag varints,
// floats as their IEEE-754 bits; every other field (the system spec, the
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
			for _, k := range idx {
				dst = binary.AppendUvarint(dst, k)
			}
		case reflect.Bool:
			for i := range n {
				if *(*bool)(cell(base, size, i, off)) {
					dst = append(dst, 1)
				} else {
					dst = append(dst, 0)
				}
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			for i := range n {
				dst = binary.AppendVarint(dst, loadInt(cell(base, size, i, off), f.Type.Kind()))
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			for i := range n {
				dst = binary.AppendUvarint(dst, loadUint(cell(base, size, i, off), f.Type.Kind()))
			}
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

func (r *snapReader) varint() int64 {
	v, n := binary.Varint(r.b)
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
func decodeData(payload []byte) (*Data, error) {
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
	sv := reflect.MakeSlice(s.Type(), n, n)
	if n == 0 {
		s.Set(sv) // empty, not nil
		return
	}
	base, size := sv.UnsafePointer(), e.Size()
	for j := 0; j < e.NumField() && r.err == nil; j++ {
		f := e.Field(j)
		off, k := f.Offset, f.Type.Kind()
		switch k {
		case reflect.String:
			dict := make([]string, r.count())
			for i := range dict {
				dict[i] = string(r.next(r.count()))
			}
			for i := 0; i < n && r.err == nil; i++ {
				x := r.uvarint()
				if x >= uint64(len(dict)) {
					r.fail()
					break
				}
				*(*string)(cell(base, size, i, off)) = dict[x]
			}
		case reflect.Bool:
			b := r.next(n)
			for i := range b {
				*(*bool)(cell(base, size, i, off)) = b[i] != 0
			}
		case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
			for i := 0; i < n && r.err == nil; i++ {
				storeInt(cell(base, size, i, off), k, r.varint())
			}
		case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			for i := 0; i < n && r.err == nil; i++ {
				storeUint(cell(base, size, i, off), k, r.uvarint())
			}
		case reflect.Float32:
			b := r.next(4 * n)
			for i := 0; i < len(b)/4; i++ {
				*(*float32)(cell(base, size, i, off)) = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
			}
		case reflect.Float64:
			b := r.next(8 * n)
			for i := 0; i < len(b)/8; i++ {
				*(*float64)(cell(base, size, i, off)) = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
			}
		}
	}
	if r.err == nil {
		s.Set(sv)
	}
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
