// minio-go v7 (Debian's golang-github-minio-minio-go-v7-dev), unmodified: minio.New with the
// host, static V4 keys, Secure false and the region (so that it does not ask GetBucketLocation).
// Its defaults: path-style requests for an endpoint that is not AWS or Google; over plain HTTP
// PUTs and UploadPart are signed chunk by chunk (STREAMING-AWS4-HMAC-SHA256-PAYLOAD), other
// requests carry their payload's SHA-256; uploads carry no Content-MD5 (SendContentMd5 is off)
// and no x-amz-checksum; PutObject sends a known size under 16 MiB as one PUT and larger ones as a
// multipart upload in parts of at least 16 MiB, four at once; a stream of unknown size (-1) goes
// up as a sequential multipart upload whose part size is chosen for the 5 TiB maximum (528 MiB,
// so one part here); listings always ask for encoding-type=url and decode the keys; RemoveObjects
// sends quiet DeleteObjects of up to 1,000 keys; ComposeObject uses UploadPartCopy; GetObject
// returns a lazy minio.Object (io.ReaderAt, io.Seeker) that makes ranged GETs; up to 10 attempts
// with backoff (200 ms unit, 1 s cap) on 5xx, throttling and connection errors; the default
// transport keeps 16 idle connections per host.

package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"time"

	"github.com/minio/minio-go/v7"
	"github.com/minio/minio-go/v7/pkg/credentials"
)

func minioVersion() string {
	return fmt.Sprintf("minio-go %s (%s)",
		sourceVersion("github.com/minio/minio-go/v7/api.go", minioLibraryVersion), goVersion())
}

// newMinioClient is the client a user makes: defaults, but for the keys, the region and plain
// HTTP. transport, when not nil, replaces the default transport.
func newMinioClient(s Settings, accessKey, secretKey string, transport http.RoundTripper) *minio.Client {
	u := must(url.Parse(s.Endpoint))
	return must(minio.New(u.Host, &minio.Options{
		Creds:     credentials.NewStaticV4(accessKey, secretKey, ""),
		Secure:    false,
		Region:    s.Region,
		Transport: transport,
	}))
}

// minioCodes reads minio.ErrorResponse, which minio-go makes of every answer that is an error.
var minioCodes errorCodes = func(err error) (string, int) {
	e := minio.ToErrorResponse(err)
	return e.Code, e.StatusCode
}

// minioRead reads a whole object (or the range opts asks for) through minio.Object.
func minioRead(ctx context.Context, c *minio.Client, bucket, key string, opts minio.GetObjectOptions) ([]byte, error) {
	obj, err := c.GetObject(ctx, bucket, key, opts)
	if err != nil {
		return nil, err
	}
	defer obj.Close()
	return io.ReadAll(obj)
}

// minioList lists the keys ListObjects hands over, up to the first error.
func minioList(ctx context.Context, c *minio.Client, bucket string, opts minio.ListObjectsOptions) ([]string, error) {
	var out []string
	for o := range c.ListObjects(ctx, bucket, opts) {
		if o.Err != nil {
			return out, o.Err
		}
		out = append(out, o.Key)
	}
	return out, nil
}

// minioChecks registers the checks of minio-go in suite.
func minioChecks(suite *Suite, s Settings) {
	const B = "minio-go"
	mc := newMinioClient(s, s.AccessKey, s.SecretKey, nil)
	core := minio.Core{Client: mc}

	getBytes := func(ctx context.Context, key string) []byte {
		return must(minioRead(ctx, mc, B, key, minio.GetObjectOptions{}))
	}
	ranged := func(start, end int64) minio.GetObjectOptions {
		var opts minio.GetObjectOptions
		check(opts.SetRange(start, end), "SetRange")
		return opts
	}
	put := func(ctx context.Context, key string, body []byte, opts minio.PutObjectOptions) minio.UploadInfo {
		return must(mc.PutObject(ctx, B, key, bytes.NewReader(body), int64(len(body)), opts))
	}
	removeAll := func(ctx context.Context, bucket string, keys []string) {
		ch := make(chan minio.ObjectInfo)
		go func() {
			defer close(ch)
			for _, k := range keys {
				ch <- minio.ObjectInfo{Key: k}
			}
		}()
		var errs []string
		for e := range mc.RemoveObjects(ctx, bucket, ch, minio.RemoveObjectsOptions{}) {
			errs = append(errs, fmt.Sprintf("%s: %v", e.ObjectName, e.Err))
		}
		expectEqual(len(errs), 0, fmt.Sprintf("errors of RemoveObjects %q", errs))
	}

	suite.Check("basic", "MakeBucket, BucketExists, ListBuckets", func(ctx context.Context) error {
		check(mc.MakeBucket(ctx, B, minio.MakeBucketOptions{}), "MakeBucket")
		expect(must(mc.BucketExists(ctx, B)), "BucketExists after MakeBucket")
		expect(!must(mc.BucketExists(ctx, "minio-go-never-made")), "BucketExists of a missing bucket")
		found := false
		for _, b := range must(mc.ListBuckets(ctx)) {
			found = found || b.Name == B
		}
		expect(found, "ListBuckets lacks %s", B)
		return nil
	})

	suite.Check("basic", "PutObject (bytes, a stream of unknown size), GetObject, StatObject with metadata", func(ctx context.Context) error {
		body := randomBytes(300*KiB+5, 1)
		info := put(ctx, "objects/one.bin", body, minio.PutObjectOptions{ContentType: "application/x-test",
			// minio-go sends a key that is an x-amz-meta- header as it is, and prefixes any other.
			UserMetadata: map[string]string{"X-Amz-Meta-Owner": "minio-go", "project": "hots3"}})
		expectEqual(info.ETag, md5hex(body), "ETag")
		stat := must(mc.StatObject(ctx, B, "objects/one.bin", minio.StatObjectOptions{}))
		expectEqual([]interface{}{stat.Size, stat.ETag, stat.ContentType}, []interface{}{int64(len(body)), md5hex(body),
			"application/x-test"}, "StatObject")
		// minio-go keys the user metadata by the canonical header name without X-Amz-Meta-.
		expectEqual(map[string]string(stat.UserMetadata), map[string]string{"Owner": "minio-go", "Project": "hots3"},
			"user metadata")
		expectSameBytes(getBytes(ctx, "objects/one.bin"), body, "body")
		put(ctx, "objects/hello.txt", []byte("hello from minio-go\n"), minio.PutObjectOptions{})
		expectEqual(string(getBytes(ctx, "objects/hello.txt")), "hello from minio-go\n", "small body")
		put(ctx, "objects/empty", nil, minio.PutObjectOptions{})
		expectEqual(must(mc.StatObject(ctx, B, "objects/empty", minio.StatObjectOptions{})).Size, int64(0),
			"size of an empty object")
		// A stream of unknown size is a multipart upload, of one part this small.
		stream := randomBytes(1*MiB+1, 2)
		info = must(mc.PutObject(ctx, B, "objects/stream.bin", hideSeek{bytes.NewReader(stream)}, -1,
			minio.PutObjectOptions{}))
		expect(strings.HasSuffix(info.ETag, "-1"), "ETag of a stream of unknown size (one part): %s", info.ETag)
		expectEqual(info.Size, int64(len(stream)), "size uploaded")
		expectSameBytes(getBytes(ctx, "objects/stream.bin"), stream, "stream")
		return nil
	})

	suite.Check("basic", "GetObject with ranges: SetRange, suffix, open-ended", func(ctx context.Context) error {
		body := randomBytes(1*MiB, 3)
		put(ctx, "objects/ranged.bin", body, minio.PutObjectOptions{})
		for _, r := range [][2]int64{{0, 0}, {12345, 12345 + 4095}, {MiB - 10, MiB - 1}} {
			got := must(minioRead(ctx, mc, B, "objects/ranged.bin", ranged(r[0], r[1])))
			expectSameBytes(got, body[r[0]:r[1]+1], fmt.Sprintf("range %d-%d", r[0], r[1]))
		}
		expectSameBytes(must(minioRead(ctx, mc, B, "objects/ranged.bin", ranged(500000, 0))), body[500000:], "open range")
		expectSameBytes(must(minioRead(ctx, mc, B, "objects/ranged.bin", ranged(0, -7))), body[len(body)-7:], "suffix range")
		return nil
	})

	suite.Check("basic", "CopyObject with conditions, RemoveObject", func(ctx context.Context) error {
		stat := must(mc.StatObject(ctx, B, "objects/one.bin", minio.StatObjectOptions{}))
		must(mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: B, Object: "objects/copy.bin"},
			minio.CopySrcOptions{Bucket: B, Object: "objects/one.bin", MatchETag: stat.ETag}))
		// minio-go 7.0.46 takes the ETag of a copy from an ETag response header, which S3 does not
		// send (it is in the CopyObjectResult body): UploadInfo.ETag of CopyObject is empty, and
		// the ETag of a copy is checked with StatObject.
		copied := must(mc.StatObject(ctx, B, "objects/copy.bin", minio.StatObjectOptions{}))
		expectEqual(copied.ETag, stat.ETag, "ETag of the copy")
		expectSameBytes(getBytes(ctx, "objects/copy.bin"), getBytes(ctx, "objects/one.bin"), "copy")
		_, err := mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: B, Object: "objects/copy2.bin"},
			minio.CopySrcOptions{Bucket: B, Object: "objects/one.bin", MatchETag: "0123456789abcdef0123456789abcdef"})
		minioCodes.expect(err, "PreconditionFailed", 412, "copy with a stale ETag")
		check(mc.RemoveObject(ctx, B, "objects/copy.bin", minio.RemoveObjectOptions{}), "RemoveObject")
		_, err = mc.StatObject(ctx, B, "objects/copy.bin", minio.StatObjectOptions{})
		// A HEAD answer has no body: minio-go names a 404 of an object NoSuchKey itself.
		minioCodes.expect(err, "NoSuchKey", 404, "StatObject after RemoveObject")
		return nil
	})

	suite.Check("basic", "ListObjects: recursive, by directory, V1, StartAfter", func(ctx context.Context) error {
		var ks []string
		for d := 0; d < 3; d++ {
			for f := 0; f < 4; f++ {
				ks = append(ks, fmt.Sprintf("tree/d%d/f%d.txt", d, f))
			}
		}
		ks = append(ks, "tree/top.txt")
		check(parallelLimit(len(ks), 8, func(i int) error {
			_, err := mc.PutObject(ctx, B, ks[i], strings.NewReader("content of "+ks[i]), int64(len("content of "+ks[i])),
				minio.PutObjectOptions{})
			return err
		}), "PutObject")
		sort.Strings(ks)
		var flat []minio.ObjectInfo
		for o := range mc.ListObjects(ctx, B, minio.ListObjectsOptions{Prefix: "tree/", Recursive: true}) {
			check(o.Err, "ListObjects")
			flat = append(flat, o)
		}
		var names []string
		for _, o := range flat {
			names = append(names, o.Key)
		}
		expectEqual(names, ks, "recursive ListObjects")
		expectEqual(flat[len(flat)-1].Size, int64(len("content of tree/top.txt")), "size in the listing")
		// Without Recursive, minio-go lists with the delimiter "/" and hands the common prefixes
		// over as entries whose key ends in "/", after the keys of the same page.
		dir := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "tree/"}))
		expectEqual(dir, []string{"tree/top.txt", "tree/d0/", "tree/d1/", "tree/d2/"}, "listing by directory")
		v1 := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "tree/d1/", UseV1: true}))
		expectEqual(v1, []string{"tree/d1/f0.txt", "tree/d1/f1.txt", "tree/d1/f2.txt", "tree/d1/f3.txt"}, "V1")
		after := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "tree/", Recursive: true,
			StartAfter: "tree/d2/f1.txt"}))
		expectEqual(after, []string{"tree/d2/f2.txt", "tree/d2/f3.txt", "tree/top.txt"}, "StartAfter")
		return nil
	})

	big := randomBytes(40*MiB+3, 4)

	suite.Check("multipart", "PutObject of 40 MiB: known size (16 MiB parts), unknown size; GET partNumber=2", func(ctx context.Context) error {
		info := put(ctx, "big/known.bin", big, minio.PutObjectOptions{})
		expect(strings.HasSuffix(info.ETag, "-3"), "ETag of three 16 MiB parts: %s", info.ETag)
		stat := must(mc.StatObject(ctx, B, "big/known.bin", minio.StatObjectOptions{}))
		expectEqual([]interface{}{stat.Size, stat.ETag}, []interface{}{int64(len(big)), info.ETag}, "StatObject")
		expectSameBytes(getBytes(ctx, "big/known.bin"), big, "content")
		var part minio.GetObjectOptions
		part.PartNumber = 2
		expectSameBytes(must(minioRead(ctx, mc, B, "big/known.bin", part)), big[16*MiB:32*MiB], "GET partNumber=2")
		info = must(mc.PutObject(ctx, B, "big/stream.bin", hideSeek{bytes.NewReader(big)}, -1, minio.PutObjectOptions{}))
		expect(strings.HasSuffix(info.ETag, "-1"), "ETag of a stream of unknown size (one 528 MiB part): %s", info.ETag)
		expectSameBytes(getBytes(ctx, "big/stream.bin"), big, "streamed content")
		uploads := 0
		for u := range mc.ListIncompleteUploads(ctx, B, "big/", true) {
			check(u.Err, "ListIncompleteUploads")
			uploads++
		}
		expectEqual(uploads, 0, "incomplete uploads after finished uploads")
		return nil
	})

	suite.Check("multipart", "GetObject as io.ReaderAt and io.Seeker (a data loader's reads)", func(ctx context.Context) error {
		obj := must(mc.GetObject(ctx, B, "big/known.bin", minio.GetObjectOptions{}))
		defer obj.Close()
		stat := must(obj.Stat())
		expectEqual(stat.Size, int64(len(big)), "Stat of the object")
		rng := newRand(4)
		for i := 0; i < 16; i++ {
			off := int64(rng.Intn(len(big) - 64*KiB))
			buf := make([]byte, 64*KiB)
			n := must(obj.ReadAt(buf, off))
			expectSameBytes(buf[:n], big[off:off+64*KiB], fmt.Sprintf("ReadAt %d", off))
		}
		// A sample inside a shard, as a tar reader over an io.SectionReader reads it.
		sample := must(io.ReadAll(io.NewSectionReader(obj, 17*MiB-5, 300*KiB)))
		expectSameBytes(sample, big[17*MiB-5:17*MiB-5+300*KiB], "SectionReader")
		pos := must(obj.Seek(-100, io.SeekEnd))
		expectEqual(pos, int64(len(big)-100), "Seek from the end")
		tail := must(io.ReadAll(obj))
		expectSameBytes(tail, big[len(big)-100:], "Read after Seek from the end")
		must(obj.Seek(33*MiB, io.SeekStart))
		must(obj.Seek(7, io.SeekCurrent))
		head := make([]byte, 1000)
		must(io.ReadFull(obj, head))
		expectSameBytes(head, big[33*MiB+7:33*MiB+1007], "Read after Seek")
		return nil
	})

	suite.Check("multipart", "ComposeObject (UploadPartCopy) of three objects, CopyObject of a multipart object", func(ctx context.Context) error {
		parts := [][]byte{randomBytes(5*MiB, 10), randomBytes(6*MiB+3, 11), randomBytes(100*KiB, 12)}
		var srcs []minio.CopySrcOptions
		var want []byte
		for i, p := range parts {
			key := fmt.Sprintf("compose/src-%d", i)
			put(ctx, key, p, minio.PutObjectOptions{})
			srcs = append(srcs, minio.CopySrcOptions{Bucket: B, Object: key})
			want = append(want, p...)
		}
		info := must(mc.ComposeObject(ctx, minio.CopyDestOptions{Bucket: B, Object: "compose/joined"}, srcs...))
		expect(strings.HasSuffix(info.ETag, "-3"), "ETag of a three-part object: %s", info.ETag)
		expectSameBytes(getBytes(ctx, "compose/joined"), want, "composed object")
		// A copy is a new object in one part: its ETag is the MD5 of its data, as on S3.
		must(mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: B, Object: "compose/copied"},
			minio.CopySrcOptions{Bucket: B, Object: "big/known.bin"}))
		// UploadInfo.ETag of CopyObject is empty (see "CopyObject with conditions").
		copied := must(mc.StatObject(ctx, B, "compose/copied", minio.StatObjectOptions{}))
		expectEqual(copied.ETag, md5hex(big), "ETag of a copy of a multipart object")
		expectSameBytes(getBytes(ctx, "compose/copied"), big, "copy of a multipart object")
		return nil
	})

	suite.Check("multipart", "Core: NewMultipartUpload, PutObjectPart, ListObjectParts, Complete; ListIncompleteUploads, RemoveIncompleteUpload", func(ctx context.Context) error {
		a := randomBytes(5*MiB, 13)
		b := randomBytes(1000, 14)
		id := must(core.NewMultipartUpload(ctx, B, "mp/joined.bin", minio.PutObjectOptions{}))
		p1 := must(core.PutObjectPart(ctx, B, "mp/joined.bin", id, 1, bytes.NewReader(a), int64(len(a)), "", "", nil))
		expectEqual(p1.ETag, md5hex(a), "ETag of part 1")
		p2 := must(core.PutObjectPart(ctx, B, "mp/joined.bin", id, 2, bytes.NewReader(b), int64(len(b)), "", "", nil))
		listed := must(core.ListObjectParts(ctx, B, "mp/joined.bin", id, 0, 0))
		var sizes [][2]int64
		for _, p := range listed.ObjectParts {
			sizes = append(sizes, [2]int64{int64(p.PartNumber), p.Size})
		}
		expectEqual(sizes, [][2]int64{{1, 5 * MiB}, {2, 1000}}, "ListObjectParts")
		other := must(core.NewMultipartUpload(ctx, B, "mp/left.bin", minio.PutObjectOptions{}))
		must(core.PutObjectPart(ctx, B, "mp/left.bin", other, 1, bytes.NewReader(b), int64(len(b)), "", "", nil))
		var pending []string
		for u := range mc.ListIncompleteUploads(ctx, B, "mp/", true) {
			check(u.Err, "ListIncompleteUploads")
			pending = append(pending, u.Key)
		}
		sort.Strings(pending)
		expectEqual(pending, []string{"mp/joined.bin", "mp/left.bin"}, "ListIncompleteUploads")
		check(mc.RemoveIncompleteUpload(ctx, B, "mp/left.bin"), "RemoveIncompleteUpload")
		etag := must(core.CompleteMultipartUpload(ctx, B, "mp/joined.bin", id, []minio.CompletePart{
			{PartNumber: 1, ETag: p1.ETag}, {PartNumber: 2, ETag: p2.ETag}}, minio.PutObjectOptions{}))
		expect(strings.HasSuffix(etag, "-2"), "ETag of two parts: %s", etag)
		expectSameBytes(getBytes(ctx, "mp/joined.bin"), append(append([]byte{}, a...), b...), "joined object")
		pending = nil
		for u := range mc.ListIncompleteUploads(ctx, B, "mp/", true) {
			check(u.Err, "ListIncompleteUploads")
			pending = append(pending, u.Key)
		}
		expectEqual(len(pending), 0, fmt.Sprintf("uploads left: %q", pending))
		_, err := core.PutObjectPart(ctx, B, "mp/left.bin", other, 2, bytes.NewReader(b), int64(len(b)), "", "", nil)
		minioCodes.expect(err, "NoSuchUpload", 404, "PutObjectPart of a removed upload")
		return nil
	})

	suite.Check("small-files", "3,000 small objects from 32 goroutines: ListObjects (V2, V1, directories, StartAfter), RemoveObjects", func(ctx context.Context) error {
		smallFiles(smallFilesClient{
			put: func(key string, body []byte) error {
				_, err := mc.PutObject(ctx, B, key, bytes.NewReader(body), int64(len(body)), minio.PutObjectOptions{})
				return err
			},
			list: func(startAfter string) []string {
				return must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "small/", Recursive: true,
					StartAfter: startAfter}))
			},
			// Without Recursive: the common prefixes, as entries whose key ends in "/".
			prefixes: func() []string { return must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "small/"})) },
			remove:   func(all []string) { removeAll(ctx, B, all) },
			listings: func(all []string) {
				// Pages of 1,000 by default: three ListObjectsV2 requests.
				got := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "small/", Recursive: true}))
				expectEqual(len(got), len(all), "objects listed")
				expectEqual(got, all, "listing order and keys")
				got = must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "small/", Recursive: true, MaxKeys: 250}))
				expectEqual(got, all, "listing in pages of 250")
				got = must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "small/", Recursive: true, UseV1: true}))
				expectEqual(got, all, "listing by V1 (marker pagination)")
			},
		})
		return nil
	})

	suite.Check("small-files", "awkward key names: put, list (V2 and V1, encoding-type=url), get", func(ctx context.Context) error {
		awkwardKeys(func(key string, body []byte) { put(ctx, key, body, minio.PutObjectOptions{}) }, func(want []string) {
			// minio-go asks for encoding-type=url and decodes the keys itself.
			expectEqual(must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "odd/", Recursive: true})), want,
				"listed keys")
			expectEqual(must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "odd/", Recursive: true, UseV1: true})),
				want, "listed keys (V1)")
			dir := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "odd/"}))
			found := false
			for _, k := range dir {
				found = found || k == "odd/unicodé/"
			}
			expect(found, "prefix odd/unicodé/ in %q", dir)
		}, func(key string) []byte { return getBytes(ctx, key) })
		return nil
	})

	const ckpt = 16*MiB + 100

	suite.Check("checkpoint", "save ranks in parallel (multipart), commit marker", func(ctx context.Context) error {
		for _, step := range []int{100, 200, 300} {
			check(parallel(3, func(rank int) error {
				info := put(ctx, fmt.Sprintf("ckpt/step-%d/rank-%d.pt", step, rank), randomBytes(ckpt, int64(step*10+rank)),
					minio.PutObjectOptions{})
				expect(strings.HasSuffix(info.ETag, "-2"), "ETag of a 16 MiB + 100 shard: %s", info.ETag)
				return nil
			}), "save")
			// minio-go 7.0.46 cannot send If-None-Match with a PUT: PutObjectOptions has no
			// condition, and it turns any header it does not know in UserMetadata into
			// x-amz-meta-*. A minio-go user checks that the marker is absent and writes it;
			// the race of two committers is checked with go-v2.
			marker := fmt.Sprintf("ckpt/step-%d/COMMIT", step)
			_, err := mc.StatObject(ctx, B, marker, minio.StatObjectOptions{})
			minioCodes.expect(err, "NoSuchKey", 404, "StatObject of a marker not written yet")
			put(ctx, marker, []byte(fmt.Sprintf("step %d", step)), minio.PutObjectOptions{})
		}
		return nil
	})

	suite.Check("checkpoint", "load the latest step, rotate with RemoveObjects, rename by copy + remove", func(ctx context.Context) error {
		steps := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "ckpt/"}))
		expectEqual(steps, []string{"ckpt/step-100/", "ckpt/step-200/", "ckpt/step-300/"}, "steps")
		latest := steps[len(steps)-1]
		expectEqual(string(getBytes(ctx, latest+"COMMIT")), "step 300", "commit marker")
		check(parallel(3, func(rank int) error {
			expectSameBytes(getBytes(ctx, fmt.Sprintf("%srank-%d.pt", latest, rank)), randomBytes(ckpt, int64(3000+rank)),
				fmt.Sprintf("rank %d", rank))
			return nil
		}), "load")
		old := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "ckpt/step-100/", Recursive: true}))
		expectEqual(len(old), 4, "objects of step 100")
		removeAll(ctx, B, old)
		moved := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "ckpt/step-300/", Recursive: true}))
		for _, k := range moved {
			must(mc.CopyObject(ctx, minio.CopyDestOptions{Bucket: B, Object: strings.Replace(k, "step-300", "best", 1)},
				minio.CopySrcOptions{Bucket: B, Object: k}))
			check(mc.RemoveObject(ctx, B, k, minio.RemoveObjectOptions{}), "RemoveObject")
		}
		steps = must(minioList(ctx, mc, B, minio.ListObjectsOptions{Prefix: "ckpt/"}))
		expectEqual(steps, []string{"ckpt/best/", "ckpt/step-200/"}, "steps after rotation and renaming")
		expectSameBytes(getBytes(ctx, "ckpt/best/rank-2.pt"), randomBytes(ckpt, 3002), "renamed rank 2")
		return nil
	})

	suite.Check("errors", "NoSuchKey (GET and HEAD), NoSuchBucket, BucketNotEmpty, InvalidRange, 412", func(ctx context.Context) error {
		_, err := minioRead(ctx, mc, B, "no/such/key", minio.GetObjectOptions{})
		minioCodes.expect(err, "NoSuchKey", 404, "GetObject")
		// A HEAD answer has no body: minio-go names a 404 of an object NoSuchKey itself.
		_, err = mc.StatObject(ctx, B, "no/such/key", minio.StatObjectOptions{})
		minioCodes.expect(err, "NoSuchKey", 404, "StatObject")
		_, err = minioRead(ctx, mc, "minio-go-no-such-bucket", "k", minio.GetObjectOptions{})
		minioCodes.expect(err, "NoSuchBucket", 404, "GetObject in a missing bucket")
		_, err = minioList(ctx, mc, "minio-go-no-such-bucket", minio.ListObjectsOptions{})
		minioCodes.expect(err, "NoSuchBucket", 404, "ListObjects of a missing bucket")
		minioCodes.expect(mc.RemoveBucket(ctx, "minio-go-no-such-bucket"), "NoSuchBucket", 404, "RemoveBucket of a missing bucket")
		minioCodes.expect(mc.RemoveBucket(ctx, B), "BucketNotEmpty", 409, "RemoveBucket of a bucket with objects")
		_, err = minioRead(ctx, mc, B, "objects/hello.txt", ranged(1000, 1009))
		minioCodes.expect(err, "InvalidRange", 416, "range past the end")
		var opts minio.GetObjectOptions
		check(opts.SetMatchETag("0123456789abcdef0123456789abcdef"), "SetMatchETag")
		_, err = minioRead(ctx, mc, B, "objects/hello.txt", opts)
		minioCodes.expect(err, "PreconditionFailed", 412, "If-Match")
		return nil
	})

	suite.Check("errors", "SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied", func(ctx context.Context) error {
		wrong := newMinioClient(s, s.AccessKey, s.SecretKey+"x", nil)
		_, err := wrong.ListBuckets(ctx)
		minioCodes.expect(err, "SignatureDoesNotMatch", 403, "ListBuckets with a wrong secret")
		_, err = minioRead(ctx, wrong, B, "objects/hello.txt", minio.GetObjectOptions{})
		minioCodes.expect(err, "SignatureDoesNotMatch", 403, "GetObject with a wrong secret")
		_, err = wrong.PutObject(ctx, B, "objects/x", strings.NewReader("x"), 1, minio.PutObjectOptions{})
		minioCodes.expect(err, "SignatureDoesNotMatch", 403, "PutObject with a wrong secret")
		_, err = minioList(ctx, newMinioClient(s, "AKIANOSUCHKEY0000000", s.SecretKey, nil), B, minio.ListObjectsOptions{})
		minioCodes.expect(err, "InvalidAccessKeyId", 403, "an unknown key")
		const shared = "shared-minio-go"
		check(mc.MakeBucket(ctx, shared, minio.MakeBucketOptions{}), "MakeBucket")
		must(mc.PutObject(ctx, shared, "readable.txt", strings.NewReader("for the reader"), 14, minio.PutObjectOptions{}))
		reader := newMinioClient(s, s.ReaderAccessKey, s.ReaderSecretKey, nil)
		expectEqual(string(must(minioRead(ctx, reader, shared, "readable.txt", minio.GetObjectOptions{}))), "for the reader",
			"the reader reads")
		_, err = reader.PutObject(ctx, shared, "written.txt", strings.NewReader("no"), 2, minio.PutObjectOptions{})
		minioCodes.expect(err, "AccessDenied", 403, "PutObject by a read-only user")
		check(mc.RemoveObject(ctx, shared, "readable.txt", minio.RemoveObjectOptions{}), "RemoveObject")
		check(mc.RemoveBucket(ctx, shared), "RemoveBucket")
		return nil
	})

	suite.Check("presign", "PresignedPutObject, PresignedGetObject, PresignedHeadObject fetched; an expired URL", func(ctx context.Context) error {
		// minio-go hands a presigned URL over alone: no header goes with it.
		fetchURL := func(method string, u *url.URL, body []byte) (int, string, http.Header) {
			return fetch(ctx, method, u.String(), nil, body)
		}
		body := []byte("through a presigned PUT")
		status, text, _ := fetchURL(http.MethodPut, must(mc.PresignedPutObject(ctx, B, "presigned/up.txt", time.Minute)), body)
		expectEqual(status, 200, "presigned PUT ("+text+")")
		status, text, _ = fetchURL(http.MethodGet, must(mc.PresignedGetObject(ctx, B, "presigned/up.txt", time.Minute, nil)), nil)
		expectEqual([]interface{}{status, text}, []interface{}{200, string(body)}, "presigned GET")
		status, _, header := fetchURL(http.MethodGet, must(mc.PresignedGetObject(ctx, B, "presigned/up.txt", time.Minute,
			url.Values{"response-content-type": {"text/x-minio"}})), nil)
		expectEqual([]interface{}{status, header.Get("Content-Type")}, []interface{}{200, "text/x-minio"},
			"response-content-type override")
		status, _, header = fetchURL(http.MethodHead, must(mc.PresignedHeadObject(ctx, B, "presigned/up.txt", time.Minute, nil)), nil)
		expectPresignedHead(status, header, body)
		short := must(mc.PresignedGetObject(ctx, B, "presigned/up.txt", time.Second, nil))
		expectExpired(ctx, http.MethodGet, short.String(), nil)
		return nil
	})

	suite.Check("concurrency", "64 goroutines read random 1 MiB ranges of a 64 MiB object", func(ctx context.Context) error {
		// One client and its default transport, as a data loader's workers share them.
		return concurrentRangedReads(func(data []byte) { put(ctx, "loader/shard.bin", data, minio.PutObjectOptions{}) },
			func(first, last int) []byte {
				return must(minioRead(ctx, mc, B, "loader/shard.bin", ranged(int64(first), int64(last))))
			})
	})

	suite.Check("concurrency", "readers streaming during overwrites (PUT and multipart) see one version", func(ctx context.Context) error {
		// 12 MiB goes up in one PUT, 20 MiB as a multipart upload (16 MiB + 4 MiB).
		size := func(v int) int {
			if v%2 == 1 {
				return 20 * MiB
			}
			return 12 * MiB
		}
		return readersDuringOverwrites(size, func(_ int, body []byte) {
			put(ctx, "race/obj", body, minio.PutObjectOptions{})
		}, func() func() []byte {
			reader := newMinioClient(s, s.AccessKey, s.SecretKey, nil)
			return func() []byte { return must(minioRead(ctx, reader, B, "race/obj", minio.GetObjectOptions{})) }
		})
	})

	suite.SoakCheck(minioSoak)

	suite.Check("basic", "clean up: RemoveObjects everything, RemoveBucket", func(ctx context.Context) error {
		all := must(minioList(ctx, mc, B, minio.ListObjectsOptions{Recursive: true}))
		removeAll(ctx, B, all)
		check(mc.RemoveBucket(ctx, B), "RemoveBucket")
		expect(!must(mc.BucketExists(ctx, B)), "the bucket still exists")
		return nil
	})
}

// minioSoak is the connection-reuse soak of minio_js.mjs: one client whose transport keeps at
// most two connections, a random mix of operations on twelve keys, each request under the bound.
func minioSoak(ctx context.Context, s Settings) error {
	const SB = "minio-go-reuse"
	transport := must(minio.DefaultTransport(false))
	transport.MaxConnsPerHost = 2
	transport.MaxIdleConnsPerHost = 2
	c := newMinioClient(s, s.AccessKey, s.SecretKey, transport)
	// The same pool, a wrong secret: its 403s come back on the connections the next requests use.
	wrong := newMinioClient(s, s.AccessKey, s.SecretKey+"x", transport)
	core := minio.Core{Client: c}
	model := newSoakModel() // ETags unquoted, as minio-go gives them
	fails := minioCodes.fails
	read := func(ctx context.Context, key string, opts minio.GetObjectOptions) ([]byte, error) {
		return minioRead(ctx, c, SB, key, opts)
	}
	putObject := func(ctx context.Context, c *minio.Client, bucket, key string, data []byte) (minio.UploadInfo, error) {
		return c.PutObject(ctx, bucket, key, bytes.NewReader(data), int64(len(data)), minio.PutObjectOptions{})
	}

	var put, get, ranged, badRange, conditions, refused, remove, copyOp, multipart, listing SoakOp
	put = SoakOp{"put", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data := model.Body(rng)
		info := succeeds(call, "PutObject", func() (minio.UploadInfo, error) {
			return putObject(ctx, c, SB, key, data)
		})
		expectEqual(info.ETag, md5hex(data), "ETag of a PUT")
		model.Set(key, data, info.ETag)
		return nil
	}}
	get = soakGet(model, minioCodes, func(ctx context.Context, key string) ([]byte, error) {
		return read(ctx, key, minio.GetObjectOptions{})
	})
	ranged = soakRanged(model, put, func(ctx context.Context, key string, first, end int) ([]byte, error) {
		var opts minio.GetObjectOptions
		check(opts.SetRange(int64(first), int64(end-1)), "SetRange")
		return read(ctx, key, opts)
	})
	badRange = SoakOp{"badRange", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data, ok := model.Get(key)
		if !ok {
			// minio-go names a 404 of HEAD (no body) NoSuchKey itself.
			fails(call, "StatObject", func() error {
				_, err := c.StatObject(ctx, SB, key, minio.StatObjectOptions{})
				return err
			}, "NoSuchKey", 404)
			return nil
		}
		var opts minio.GetObjectOptions
		check(opts.SetRange(int64(len(data)+5), int64(len(data)+14)), "SetRange")
		fails(call, "GetObject", func() error {
			_, err := read(ctx, key, opts)
			return err
		}, "InvalidRange", 416)
		return nil
	}}
	conditions = SoakOp{"conditions", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		source := model.Keys[rng.Intn(len(model.Keys))]
		if _, ok := model.Get(source); !ok || source == key {
			return put.Run(ctx, key, rng, call)
		}
		// minio-go 7.0.46 has no If-None-Match for PUT; its conditions are on GET and on the
		// source of a copy.
		fails(call, "CopyObject", func() error {
			_, err := c.CopyObject(ctx, minio.CopyDestOptions{Bucket: SB, Object: key},
				minio.CopySrcOptions{Bucket: SB, Object: source, MatchETag: strings.Repeat("0", 32)})
			return err
		}, "PreconditionFailed", 412)
		var ifMatch minio.GetObjectOptions
		check(ifMatch.SetMatchETag(strings.Repeat("0", 32)), "SetMatchETag")
		fails(call, "GetObject", func() error {
			_, err := read(ctx, source, ifMatch)
			return err
		}, "PreconditionFailed", 412)
		// A 304 is not a success for minio-go: it reports an error whose code is the status
		// line (the answer has no body); what matters is the status.
		var ifNoneMatch minio.GetObjectOptions
		check(ifNoneMatch.SetMatchETagExcept(model.ETag(source)), "SetMatchETagExcept")
		err := rejects(call("GetObject", func() error {
			_, err := read(ctx, source, ifNoneMatch)
			return err
		}), "GetObject If-None-Match")
		_, status := minioCodes(err)
		expectEqual(status, 304, fmt.Sprintf("status of GetObject If-None-Match (%v)", err))
		return nil
	}}
	refused = SoakOp{"refused", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		fails(call, "PutObject", func() error {
			_, err := putObject(ctx, wrong, SB, key, model.Body(rng))
			return err
		}, "SignatureDoesNotMatch", 403)
		fails(call, "GetObject", func() error {
			obj, err := wrong.GetObject(ctx, SB, key, minio.GetObjectOptions{})
			if err == nil {
				defer obj.Close()
				_, err = io.ReadAll(obj)
			}
			return err
		}, "SignatureDoesNotMatch", 403)
		fails(call, "PutObject", func() error {
			_, err := putObject(ctx, c, "minio-go-soak-no-such-bucket", key, model.Body(rng))
			return err
		}, "NoSuchBucket", 404)
		return nil
	}}
	remove = SoakOp{"remove", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		check(call("RemoveObject", func() error {
			return c.RemoveObject(ctx, SB, key, minio.RemoveObjectOptions{})
		}), "RemoveObject")
		model.Delete(key)
		return nil
	}}
	copyOp = soakCopy(model, minioCodes, func(ctx context.Context, key, source string) (string, error) {
		info, err := c.CopyObject(ctx, minio.CopyDestOptions{Bucket: SB, Object: key},
			minio.CopySrcOptions{Bucket: SB, Object: source})
		return info.ETag, err
	}, func(ctx context.Context, call SoakCall, key string, data []byte, _ string) string {
		// minio-go 7.0.46 leaves the ETag of a copy empty (it looks for a response header S3
		// does not send): StatObject tells it.
		stat := succeeds(call, "StatObject", func() (minio.ObjectInfo, error) {
			return c.StatObject(ctx, SB, key, minio.StatObjectOptions{})
		})
		expectEqual(stat.ETag, md5hex(data), "ETag of a copy")
		return stat.ETag
	})
	multipart = SoakOp{"multipart", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		id := succeeds(call, "NewMultipartUpload", func() (string, error) {
			return core.NewMultipartUpload(ctx, SB, key, minio.PutObjectOptions{})
		})
		data := model.Body(rng)
		// minio-go refuses part number 0 itself, before sending anything.
		part := succeeds(call, "PutObjectPart", func() (minio.ObjectPart, error) {
			return core.PutObjectPart(ctx, SB, key, id, 1, bytes.NewReader(data), int64(len(data)), "", "", nil)
		})
		if rng.Float() < 0.5 {
			check(call("AbortMultipartUpload", func() error {
				return core.AbortMultipartUpload(ctx, SB, key, id)
			}), "AbortMultipartUpload")
			fails(call, "PutObjectPart", func() error {
				more := model.Body(rng)
				_, err := core.PutObjectPart(ctx, SB, key, id, 2, bytes.NewReader(more), int64(len(more)), "", "", nil)
				return err
			}, "NoSuchUpload", 404)
			return nil
		}
		etag := succeeds(call, "CompleteMultipartUpload", func() (string, error) {
			return core.CompleteMultipartUpload(ctx, SB, key, id,
				[]minio.CompletePart{{PartNumber: 1, ETag: part.ETag}}, minio.PutObjectOptions{})
		})
		model.Set(key, data, etag)
		return nil
	}}
	listing = soakListing(model, "ListObjects", func(ctx context.Context) ([]string, error) {
		return minioList(ctx, c, SB, minio.ListObjectsOptions{Prefix: "soak/", Recursive: true})
	})

	check(c.MakeBucket(ctx, SB, minio.MakeBucketOptions{}), "MakeBucket")
	err := soak(ctx, s, []SoakOp{put, put, put, get, get, ranged, badRange, conditions, refused, remove, copyOp,
		multipart, listing}, model, minioCodes)
	if err != nil {
		return err
	}
	for _, key := range model.Stored() {
		check(c.RemoveObject(ctx, SB, key, minio.RemoveObjectOptions{}), "RemoveObject")
	}
	return c.RemoveBucket(ctx, SB)
}
