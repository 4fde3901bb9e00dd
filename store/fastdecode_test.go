package store

import (
	"reflect"
	"testing"

	"github.com/rosterhq/roster/model"
	"pgregory.net/rapid"
)

// fullInstance returns an instance with every field set to a non-zero value, found by
// reflection so that a field added to Instance is covered without editing this test.
func fullInstance(t *testing.T) model.Instance {
	var in model.Instance
	v := reflect.ValueOf(&in).Elem()
	for i := range v.NumField() {
		f := v.Field(i)
		switch f.Kind() {
		case reflect.String:
			f.SetString("x" + v.Type().Field(i).Name)
		case reflect.Int, reflect.Int64:
			f.SetInt(int64(1000 + i))
		case reflect.Uint64:
			f.SetUint(uint64(1 << 40))
		case reflect.Float64:
			f.SetFloat(2.5)
		case reflect.Bool:
			f.SetBool(true)
		case reflect.Map:
			f.Set(reflect.ValueOf(map[string]string{"a": "1", "b": "2"}))
		default:
			t.Fatalf("fullInstance does not know how to fill %s (%s)", v.Type().Field(i).Name, f.Kind())
		}
	}
	return in
}

func TestInstanceDecoder_FastPathCoversEveryField(t *testing.T) {
	c := newValueCodec()
	in := fullInstance(t)
	b, err := c.encode(in)
	mustDo(t, err)
	d := instanceDecoder{codec: c}
	var got model.Instance
	if err := d.fast(b, &got); err != nil {
		t.Fatalf("the fast path does not handle every Instance field: %v", err)
	}
	if !reflect.DeepEqual(got, in) {
		t.Fatalf("fast decode = %+v, want %+v", got, in)
	}
}

func TestInstanceDecoder_MatchesGenericCodec(t *testing.T) {
	c := newValueCodec()
	rapid.Check(t, func(t *rapid.T) {
		in := model.Instance{
			Namespace:   rapid.String().Draw(t, "ns"),
			Group:       rapid.String().Draw(t, "group"),
			Service:     rapid.StringN(0, 600, -1).Draw(t, "service"),
			IP:          rapid.String().Draw(t, "ip"),
			Port:        rapid.IntRange(-1<<40, 1<<40).Draw(t, "port"),
			Cluster:     rapid.String().Draw(t, "cluster"),
			Weight:      rapid.Float64().Draw(t, "weight"),
			Enabled:     rapid.Bool().Draw(t, "enabled"),
			Healthy:     rapid.Bool().Draw(t, "healthy"),
			Metadata:    normalizeMap(rapid.MapOfN(rapid.String(), rapid.StringN(0, 300, -1), 0, 20).Draw(t, "md")),
			CreateIndex: rapid.Uint64().Draw(t, "create"),
			ModifyIndex: rapid.Uint64().Draw(t, "modify"),
		}
		b, err := c.encode(in)
		if err != nil {
			t.Fatal(err)
		}
		var want, got model.Instance
		if err := c.decode(b, &want); err != nil {
			t.Fatal(err)
		}
		d := instanceDecoder{codec: c}
		if err := d.decode(b, &got); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("fast decode %+v\ngeneric     %+v", got, want)
		}
	})
}

func TestInstanceDecoder_FallsBackOnUnknownShape(t *testing.T) {
	c := newValueCodec()
	// A record with a field the fast path does not know: the generic codec still decodes it.
	type future struct {
		IP       string `json:"ip"`
		Port     int    `json:"port"`
		NewField string `json:"newField"`
	}
	b, err := c.encode(future{IP: "127.100.0.1", Port: 80, NewField: "x"})
	mustDo(t, err)
	d := instanceDecoder{codec: c}
	var in model.Instance
	if d.fast(b, &in) == nil {
		t.Fatal("fast path accepted an unknown field")
	}
	mustDo(t, d.decode(b, &in))
	if in.IP != "127.100.0.1" || in.Port != 80 {
		t.Fatalf("fallback decode = %+v", in)
	}
	for _, garbage := range [][]byte{nil, {0x81}, {0x81, 0xa2, 'i', 'p'}, {0xc1}} {
		if err := d.decode(garbage, &in); err == nil {
			t.Fatalf("decode(%x) succeeded", garbage)
		}
	}
}
