package store

import (
	"fmt"

	"github.com/rosterhq/roster/model"
)

// InstanceHealth is the part of an instance that the health prober and the instance
// gauges follow: no metadata, weight or enabled flag.
type InstanceHealth struct {
	Ref            model.InstanceRef
	Cluster        string
	CreateIndex    uint64
	ModifyIndex    uint64
	Healthy        bool
	UnhealthySince int64
}

// HealthOf returns the InstanceHealth of an instance.
func HealthOf(in model.Instance) InstanceHealth {
	return InstanceHealth{
		Ref: in.Ref(), Cluster: in.Cluster, CreateIndex: in.CreateIndex, ModifyIndex: in.ModifyIndex,
		Healthy: in.Healthy, UnhealthySince: in.UnhealthySince,
	}
}

// ForEachInstanceHealth calls fn with every instance's InstanceHealth and the
// health-check spec of its cluster, in key order, from one consistent read, until fn
// returns false. Unlike ForEachInstance it holds nothing but the instance at hand: each
// record is decoded without its metadata, the strings that repeat (namespace, group,
// service, cluster) are shared between calls, and hc points to one value per cluster,
// which fn must not modify. A scan of any size costs a few allocations per instance
// (its IP) and per cluster.
//
// fn runs inside the read transaction: it must not call the store (a restore waiting
// for the store would deadlock with it), and it should be quick, since a write that
// must grow the state file's mapping waits for the transaction to end.
func (s *Store) ForEachInstanceHealth(fn func(ih InstanceHealth, hc *model.HealthCheck) bool) error {
	return s.view(nil, func(r *reader) error {
		var (
			d        healthDecoder
			specs    = make(map[string]*model.HealthCheck)
			last     *model.HealthCheck
			lastSvc  model.ServiceKey
			lastName string
			keyBuf   []byte
		)
		c := r.instances.Cursor()
		for k, v := c.First(); k != nil; k, v = c.Next() {
			var ih InstanceHealth
			if err := d.decode(r.s.codec, v, &ih); err != nil {
				return err
			}
			svc := ih.Ref.ServiceKey()
			if last == nil || svc != lastSvc || ih.Cluster != lastName {
				keyBuf = append(servicePrefixTo(keyBuf[:0], svc), ih.Cluster...)
				hc, ok := specs[string(keyBuf)]
				if !ok {
					var cl model.Cluster
					found, err := r.get(r.clusters, keyBuf, &cl)
					if err != nil {
						return err
					}
					if !found {
						return fmt.Errorf("instance %s of %s: cluster %q missing: %w", model.JoinAddr(ih.Ref.IP, ih.Ref.Port), svc, ih.Cluster, ErrCorrupt)
					}
					hc = &cl.HealthCheck
					specs[string(keyBuf)] = hc
				}
				last, lastSvc, lastName = hc, svc, ih.Cluster
			}
			if !fn(ih, last) {
				return nil
			}
		}
		return nil
	})
}

// servicePrefixTo appends the key prefix of a service's records to b (servicePrefix
// without an allocation).
func servicePrefixTo(b []byte, k model.ServiceKey) []byte {
	b = appendPart(b, k.Namespace)
	b = appendPart(b, k.Group)
	return appendPart(b, k.Service)
}

// healthDecoder decodes the InstanceHealth of instance records. Like instanceDecoder it
// reads the exact shape the value codec writes, skipping metadata without building it;
// a record in any other shape is decoded by the generic codec instead.
type healthDecoder struct {
	ns, group, service, cluster string
}

func (d *healthDecoder) decode(c valueCodec, b []byte, ih *InstanceHealth) error {
	if d.fast(b, ih) {
		return nil
	}
	var in model.Instance
	if err := c.decode(b, &in); err != nil {
		return err
	}
	*ih = HealthOf(in)
	return nil
}

func (d *healthDecoder) fast(b []byte, ih *InstanceHealth) bool {
	*ih = InstanceHealth{}
	r := mpReader{b: b}
	n, ok := r.mapLen()
	if !ok {
		return false
	}
	for range n {
		key, ok := r.raw()
		if !ok {
			return false
		}
		switch string(key) {
		case "namespace":
			ok = r.internedStr(&d.ns, &ih.Ref.Namespace)
		case "group":
			ok = r.internedStr(&d.group, &ih.Ref.Group)
		case "service":
			ok = r.internedStr(&d.service, &ih.Ref.Service)
		case "cluster":
			ok = r.internedStr(&d.cluster, &ih.Cluster)
		case "ip":
			ih.Ref.IP, ok = r.str()
		case "port":
			var v int64
			v, ok = r.int()
			ih.Ref.Port = int(v)
		case "weight":
			_, ok = r.float()
		case "enabled":
			_, ok = r.bool()
		case "healthy":
			ih.Healthy, ok = r.bool()
		case "createIndex":
			var v int64
			v, ok = r.int()
			ih.CreateIndex = uint64(v)
		case "modifyIndex":
			var v int64
			v, ok = r.int()
			ih.ModifyIndex = uint64(v)
		case "unhealthySince":
			ih.UnhealthySince, ok = r.int()
		case "metadata":
			ok = r.skipStrMap()
		default:
			ok = false
		}
		if !ok {
			return false
		}
	}
	return r.i == len(b)
}

// skipStrMap reads past a map of strings (nil included) without building it.
func (r *mpReader) skipStrMap() bool {
	n, ok := r.mapLen()
	if !ok || n > len(r.b) {
		return false
	}
	for range 2 * n {
		if _, ok := r.raw(); !ok {
			return false
		}
	}
	return true
}
