// The AWS SDK for Go v2 (Debian's golang-github-aws-aws-sdk-go-v2-dev: service/s3 1.29,
// feature/s3/manager 1.11), unmodified: config.LoadDefaultConfig with the region and static keys
// (and no shared config files), s3.NewFromConfig with the endpoint and path-style addressing,
// which an IP endpoint needs. Its defaults: no checksum unless ChecksumAlgorithm asks for one
// (over plain HTTP a signed payload SHA-256 instead; DeleteObjects carries Content-MD5), GETs do
// not validate checksums unless ChecksumMode is ENABLED, the standard retryer makes 3 attempts
// with exponential backoff on 5xx, throttling and connection errors, the HTTP client keeps 10
// idle connections per host; manager.Uploader cuts 5 MiB parts and sends 5 at once (a body
// under 5 MiB goes up as one PutObject), manager.Downloader fetches 5 MiB ranges 5 at once;
// the presign client makes SigV4 query-string URLs.

package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsmiddleware "github.com/aws/aws-sdk-go-v2/aws/middleware"
	awshttp "github.com/aws/aws-sdk-go-v2/aws/transport/http"
	"github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/credentials"
	"github.com/aws/aws-sdk-go-v2/feature/s3/manager"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/s3/types"
	"github.com/aws/smithy-go"
	"github.com/aws/smithy-go/middleware"
	smithyhttp "github.com/aws/smithy-go/transport/http"
)

func awsVersion() string {
	return fmt.Sprintf("aws-sdk-go-v2 service/s3 %s, feature/s3/manager %s (%s)",
		sourceVersion("github.com/aws/aws-sdk-go-v2/service/s3/go_module_metadata.go", goModuleVersion),
		sourceVersion("github.com/aws/aws-sdk-go-v2/feature/s3/manager/go_module_metadata.go", goModuleVersion),
		goVersion())
}

// newAWSClient is the client a user makes: defaults, but for the keys, the region, the endpoint
// and path-style addressing. httpClient, when not nil, replaces the default HTTP client.
func newAWSClient(ctx context.Context, s Settings, accessKey, secretKey string,
	httpClient aws.HTTPClient) *s3.Client {
	options := []func(*config.LoadOptions) error{
		config.WithRegion(s.Region),
		config.WithCredentialsProvider(credentials.NewStaticCredentialsProvider(accessKey, secretKey, "")),
		// Whatever ~/.aws holds on this machine stays out of the test.
		config.WithSharedConfigFiles([]string{}),
		config.WithSharedCredentialsFiles([]string{}),
	}
	if httpClient != nil {
		options = append(options, config.WithHTTPClient(httpClient))
	}
	cfg := must(config.LoadDefaultConfig(ctx, options...))
	return s3.NewFromConfig(cfg, func(o *s3.Options) {
		o.UsePathStyle = true
		o.EndpointResolver = s3.EndpointResolverFromURL(s.Endpoint)
	})
}

// withHeader adds a header to one request: the SDK's way to send what its input structure has
// no field for, such as If-None-Match on PutObject in this version. The header is added before
// signing, so it is signed.
func withHeader(name, value string) func(*s3.Options) {
	return s3.WithAPIOptions(smithyhttp.AddHeaderValue(name, value))
}

// withQuery sets a query parameter of one request, before signing.
func withQuery(name, value string) func(*s3.Options) {
	return s3.WithAPIOptions(func(stack *middleware.Stack) error {
		return stack.Build.Add(middleware.BuildMiddlewareFunc("S3CompatQuery",
			func(ctx context.Context, in middleware.BuildInput, next middleware.BuildHandler) (
				middleware.BuildOutput, middleware.Metadata, error) {
				if req, ok := in.Request.(*smithyhttp.Request); ok {
					q := req.URL.Query()
					q.Set(name, value)
					req.URL.RawQuery = q.Encode()
				}
				return next.HandleBuild(ctx, in)
			}), middleware.After)
	})
}

// logRetries prints every attempt after the first one of a request, with what the previous
// attempt got: a soak request that takes too long says whether the SDK retried it and why. It
// only watches; the retryer is the default one.
func logRetries(stack *middleware.Stack) error {
	if err := stack.Initialize.Add(middleware.InitializeMiddlewareFunc("S3CompatAttempts",
		func(ctx context.Context, in middleware.InitializeInput, next middleware.InitializeHandler) (
			middleware.InitializeOutput, middleware.Metadata, error) {
			return next.HandleInitialize(middleware.WithStackValue(ctx, attemptsKey{}, &attempts{}), in)
		}), middleware.Before); err != nil {
		return err
	}
	// After the retry middleware: once per attempt.
	return stack.Finalize.Insert(middleware.FinalizeMiddlewareFunc("S3CompatRetryLog",
		func(ctx context.Context, in middleware.FinalizeInput, next middleware.FinalizeHandler) (
			middleware.FinalizeOutput, middleware.Metadata, error) {
			a, _ := middleware.GetStackValue(ctx, attemptsKey{}).(*attempts)
			if a == nil {
				return next.HandleFinalize(ctx, in)
			}
			a.n++
			if a.n > 1 {
				fmt.Printf("go-v2: %s retried (attempt %d) %.3f s after attempt %d ended with: %v\n",
					awsmiddleware.GetOperationName(ctx), a.n, time.Since(a.ended).Seconds(), a.n-1, a.err)
			}
			out, md, err := next.HandleFinalize(ctx, in)
			a.ended, a.err = time.Now(), err
			return out, md, err
		}), "Retry", middleware.After)
}

// attempts is what logRetries knows of one request: the attempts made, when the last one ended
// and its error. The attempts of one request are sequential.
type attempts struct {
	n     int
	ended time.Time
	err   error
}

type attemptsKey struct{}

// awsError is the error code (smithy.APIError) and HTTP status (awshttp.ResponseError) of err.
func awsError(err error) (string, int) {
	code, status := "", 0
	var apiErr smithy.APIError
	if errors.As(err, &apiErr) {
		code = apiErr.ErrorCode()
	}
	var respErr *awshttp.ResponseError
	if errors.As(err, &respErr) {
		status = respErr.HTTPStatusCode()
	}
	return code, status
}

// awsCodes reads the errors of this SDK.
var awsCodes errorCodes = awsError

// awsGet makes a GetObject request and reads the whole body.
func awsGet(ctx context.Context, c *s3.Client, in *s3.GetObjectInput, opts ...func(*s3.Options)) (
	[]byte, *s3.GetObjectOutput, error) {
	out, err := c.GetObject(ctx, in, opts...)
	if err != nil {
		return nil, nil, err
	}
	defer out.Body.Close()
	data, err := readAllSized(out.Body, out.ContentLength)
	return data, out, err
}

// awsChecks registers the checks of the AWS SDK for Go v2 in suite.
func awsChecks(suite *Suite, s Settings) {
	ctx := context.Background()
	const B = "go-v2"
	c := newAWSClient(ctx, s, s.AccessKey, s.SecretKey, nil)

	get := func(c *s3.Client, in *s3.GetObjectInput) ([]byte, *s3.GetObjectOutput, error) {
		return awsGet(ctx, c, in)
	}
	getBytes := func(key string, mods ...func(*s3.GetObjectInput)) []byte {
		in := &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String(key)}
		for _, m := range mods {
			m(in)
		}
		data, _, err := get(c, in)
		check(err, "GetObject "+key)
		return data
	}
	put := func(key string, body []byte) *s3.PutObjectOutput {
		return must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String(key),
			Body: bytes.NewReader(body)}))
	}
	// keys lists everything under prefix with the paginator and returns the keys and the number
	// of pages.
	keys := func(c *s3.Client, bucket, prefix string, limit int32, startAfter string) ([]string, int) {
		in := &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix)}
		if startAfter != "" {
			in.StartAfter = aws.String(startAfter)
		}
		p := s3.NewListObjectsV2Paginator(c, in, func(o *s3.ListObjectsV2PaginatorOptions) {
			o.Limit = limit
		})
		var out []string
		pages := 0
		for p.HasMorePages() {
			page := must(p.NextPage(ctx))
			pages++
			for _, o := range page.Contents {
				out = append(out, aws.ToString(o.Key))
			}
		}
		return out, pages
	}
	// prefixes lists the common prefixes under prefix with the delimiter "/".
	prefixes := func(bucket, prefix string) []string {
		out := must(c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(bucket), Prefix: aws.String(prefix),
			Delimiter: aws.String("/")}))
		var got []string
		for _, p := range out.CommonPrefixes {
			got = append(got, aws.ToString(p.Prefix))
		}
		return got
	}
	deleteAll := func(bucket string, all []string) {
		for i := 0; i < len(all); i += 1000 {
			end := i + 1000
			if end > len(all) {
				end = len(all)
			}
			var ids []types.ObjectIdentifier
			for _, k := range all[i:end] {
				ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
			}
			out := must(c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(bucket),
				Delete: &types.Delete{Objects: ids, Quiet: true}}))
			expectEqual(len(out.Errors), 0, "errors of DeleteObjects")
		}
	}
	uploader := manager.NewUploader(c)
	upload := func(key string, body io.Reader, opts ...func(*s3.Options)) *manager.UploadOutput {
		return must(uploader.Upload(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String(key),
			Body: body}, func(u *manager.Uploader) { u.ClientOptions = append(u.ClientOptions, opts...) }))
	}

	suite.Check("basic", "CreateBucket, PutObject (string, bytes), GetObject, HeadObject", func(ctx context.Context) error {
		must(c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(B)}))
		must(c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(B)}))
		text := "hello from go-v2"
		out := must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt"),
			Body: strings.NewReader(text), ContentType: aws.String("text/plain"),
			Metadata: map[string]string{"owner": "go-v2"}}))
		expectEqual(aws.ToString(out.ETag), quoted(md5hex([]byte(text))), "ETag")
		got, meta, err := get(c, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt")})
		check(err, "GetObject")
		expectEqual([]interface{}{string(got), aws.ToString(meta.ContentType), meta.Metadata},
			[]interface{}{text, "text/plain", map[string]string{"owner": "go-v2"}}, "get")
		buf := randomBytes(1*MiB+1, 1)
		out = put("obj/buffer.bin", buf)
		expectEqual(aws.ToString(out.ETag), quoted(md5hex(buf)), "ETag of 1 MiB + 1")
		expectSameBytes(getBytes("obj/buffer.bin"), buf, "bytes")
		head := must(c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(B), Key: aws.String("obj/buffer.bin")}))
		expectEqual([]interface{}{head.ContentLength, aws.ToString(head.ETag)},
			[]interface{}{int64(len(buf)), quoted(md5hex(buf))}, "HeadObject")
		expectSameBytes(getBytes("obj/buffer.bin", func(in *s3.GetObjectInput) { in.Range = aws.String("bytes=1000-1999") }),
			buf[1000:2000], "range")
		expectSameBytes(getBytes("obj/buffer.bin", func(in *s3.GetObjectInput) { in.Range = aws.String("bytes=-7") }),
			buf[len(buf)-7:], "suffix range")
		expectSameBytes(getBytes("obj/buffer.bin", func(in *s3.GetObjectInput) { in.Range = aws.String("bytes=1048570-") }),
			buf[1048570:], "open range")
		return nil
	})

	suite.Check("basic", "PutObject of a stream: refused by the SDK over HTTP; Uploader sends it", func(ctx context.Context) error {
		buf := randomBytes(1*MiB+1, 1)
		// Over plain HTTP the SDK signs the payload's SHA-256, which it cannot compute for a body
		// it cannot rewind: PutObject refuses a stream before sending anything. Its answer to a
		// stream is manager.Uploader, which reads a body under one part size into memory and
		// sends it as one PutObject (larger ones: the multipart checks).
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("obj/stream.bin"),
			Body: hideSeek{bytes.NewReader(buf)}})
		err = rejects(err, "PutObject of a stream over HTTP")
		expect(strings.Contains(err.Error(), "not seekable"), "PutObject of a stream: %v", err)
		out := upload("obj/stream.bin", hideSeek{io.MultiReader(bytes.NewReader(buf[:100000]), bytes.NewReader(buf[100000:]))})
		expectEqual([]interface{}{out.UploadID, aws.ToString(out.ETag)}, []interface{}{"", quoted(md5hex(buf))},
			"Uploader of a stream under 5 MiB: one PutObject")
		head := must(c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(B), Key: aws.String("obj/stream.bin")}))
		expectEqual([]interface{}{head.ContentLength, aws.ToString(head.ETag)},
			[]interface{}{int64(len(buf)), quoted(md5hex(buf))}, "head of the streamed object")
		expectSameBytes(getBytes("obj/stream.bin"), buf, "stream")
		return nil
	})

	suite.Check("basic", "CopyObject, DeleteObject, ListObjectsV2 and ListObjects with a delimiter", func(ctx context.Context) error {
		out := must(c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(B), Key: aws.String("obj/sub/copy.bin"),
			CopySource: aws.String(B + "/obj/buffer.bin")}))
		buf := randomBytes(1*MiB+1, 1)
		expectEqual(aws.ToString(out.CopyObjectResult.ETag), quoted(md5hex(buf)), "ETag of the copy")
		expectSameBytes(getBytes("obj/sub/copy.bin"), buf, "copy")
		v2 := must(c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(B), Prefix: aws.String("obj/"),
			Delimiter: aws.String("/")}))
		var prefixes, names []string
		for _, p := range v2.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		for _, o := range v2.Contents {
			names = append(names, aws.ToString(o.Key))
		}
		expectEqual([][]string{prefixes, names}, [][]string{{"obj/sub/"},
			{"obj/buffer.bin", "obj/hello.txt", "obj/stream.bin"}}, "V2")
		v1 := must(c.ListObjects(ctx, &s3.ListObjectsInput{Bucket: aws.String(B), Prefix: aws.String("obj/"),
			Delimiter: aws.String("/")}))
		prefixes = nil
		for _, p := range v1.CommonPrefixes {
			prefixes = append(prefixes, aws.ToString(p.Prefix))
		}
		expectEqual(prefixes, []string{"obj/sub/"}, "V1")
		expectEqual(len(v1.Contents), 3, "keys beside the prefix (V1)")
		must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(B), Key: aws.String("obj/sub/copy.bin")}))
		left, _ := keys(c, B, "obj/sub/", 0, "")
		expectEqual(len(left), 0, "after DeleteObject")
		return nil
	})

	suite.Check("multipart", "Uploader of a 40 MiB stream, Downloader, GET partNumber=2", func(ctx context.Context) error {
		data := randomBytes(40*MiB+3, 2)
		// A reader of unknown length: the Uploader buffers 5 MiB parts and sends 5 at once.
		out := upload("big/stream.bin", hideSeek{bytes.NewReader(data)})
		parts := (len(data) + 5*MiB - 1) / (5 * MiB)
		expect(strings.HasSuffix(aws.ToString(out.ETag), fmt.Sprintf("-%d\"", parts)),
			"ETag of %d parts: %s", parts, aws.ToString(out.ETag))
		expectEqual(len(out.CompletedParts), parts, "parts the Uploader completed")
		w := manager.NewWriteAtBuffer(make([]byte, 0, len(data)))
		n := must(manager.NewDownloader(c).Download(ctx, w, &s3.GetObjectInput{Bucket: aws.String(B),
			Key: aws.String("big/stream.bin")}))
		expectEqual(n, int64(len(data)), "bytes the Downloader wrote")
		expectSameBytes(w.Bytes(), data, "Downloader")
		expectSameBytes(getBytes("big/stream.bin", func(in *s3.GetObjectInput) { in.PartNumber = 2 }),
			data[5*MiB:10*MiB], "GET partNumber=2")
		head := must(c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(B), Key: aws.String("big/stream.bin"),
			PartNumber: 9}))
		expectEqual([]interface{}{head.ContentLength, head.PartsCount}, []interface{}{int64(len(data) - 8*5*MiB), int32(9)},
			"HEAD partNumber=9")
		return nil
	})

	suite.Check("multipart", "Create, UploadPart, UploadPartCopy, ListParts, ListMultipartUploads, Complete, Abort", func(ctx context.Context) error {
		a := randomBytes(5*MiB, 3)
		key := aws.String("mp/joined.bin")
		created := must(c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(B), Key: key}))
		id := created.UploadId
		p1 := must(c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(B), Key: key, UploadId: id, PartNumber: 1,
			Body: bytes.NewReader(a)}))
		expectEqual(aws.ToString(p1.ETag), quoted(md5hex(a)), "ETag of part 1")
		p2 := must(c.UploadPartCopy(ctx, &s3.UploadPartCopyInput{Bucket: aws.String(B), Key: key, UploadId: id,
			PartNumber: 2, CopySource: aws.String(B + "/obj/buffer.bin"), CopySourceRange: aws.String("bytes=0-99999")}))
		parts := must(c.ListParts(ctx, &s3.ListPartsInput{Bucket: aws.String(B), Key: key, UploadId: id}))
		var listed [][2]int64
		for _, p := range parts.Parts {
			listed = append(listed, [2]int64{int64(p.PartNumber), p.Size})
		}
		expectEqual(listed, [][2]int64{{1, 5 * MiB}, {2, 100000}}, "ListParts")
		other := must(c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(B),
			Key: aws.String("mp/aborted.bin")}))
		uploads := must(c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(B),
			Prefix: aws.String("mp/")}))
		var pending []string
		for _, u := range uploads.Uploads {
			pending = append(pending, aws.ToString(u.Key))
		}
		sort.Strings(pending)
		expectEqual(pending, []string{"mp/aborted.bin", "mp/joined.bin"}, "ListMultipartUploads")
		must(c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(B),
			Key: aws.String("mp/aborted.bin"), UploadId: other.UploadId}))
		done := must(c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(B), Key: key,
			UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{Parts: []types.CompletedPart{
				{PartNumber: 1, ETag: p1.ETag}, {PartNumber: 2, ETag: p2.CopyPartResult.ETag}}}}))
		expect(strings.HasSuffix(aws.ToString(done.ETag), `-2"`), "ETag of two parts: %s", aws.ToString(done.ETag))
		want := append(append([]byte{}, a...), randomBytes(1*MiB+1, 1)[:100000]...)
		expectSameBytes(getBytes("mp/joined.bin"), want, "joined object")
		uploads = must(c.ListMultipartUploads(ctx, &s3.ListMultipartUploadsInput{Bucket: aws.String(B),
			Prefix: aws.String("mp/")}))
		expectEqual(len(uploads.Uploads), 0, "uploads left")
		_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(B), Key: aws.String("mp/aborted.bin"),
			UploadId: other.UploadId, PartNumber: 1, Body: bytes.NewReader(a[:10])})
		awsCodes.expect(err, "NoSuchUpload", 404, "UploadPart of an aborted upload")
		return nil
	})

	suite.Check("small-files", "3,000 small objects from 32 goroutines: paginators, StartAfter, DeleteObjects", func(ctx context.Context) error {
		smallFiles(smallFilesClient{
			put: func(key string, body []byte) error {
				_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String(key),
					Body: bytes.NewReader(body)})
				return err
			},
			list: func(startAfter string) []string {
				got, _ := keys(c, B, "small/", 0, startAfter)
				return got
			},
			prefixes: func() []string { return prefixes(B, "small/") },
			remove:   func(all []string) { deleteAll(B, all) },
			listings: func(all []string) {
				got, pages := keys(c, B, "small/", 0, "")
				expectEqual([]interface{}{len(got), pages}, []interface{}{len(all), 3},
					"keys and pages at the default page size")
				expectEqual(got, all, "listing order and keys")
				got, pages = keys(c, B, "small/", 250, "")
				expectEqual([]interface{}{len(got), pages}, []interface{}{len(all), 12}, "keys and pages of 250")
				// ListObjects (V1) has no paginator in this SDK: a caller follows NextMarker, or the
				// last key when a listing without a delimiter leaves NextMarker out.
				var v1 []string
				marker := ""
				for {
					in := &s3.ListObjectsInput{Bucket: aws.String(B), Prefix: aws.String("small/")}
					if marker != "" {
						in.Marker = aws.String(marker)
					}
					page := must(c.ListObjects(ctx, in))
					for _, o := range page.Contents {
						v1 = append(v1, aws.ToString(o.Key))
					}
					if !page.IsTruncated {
						break
					}
					marker = aws.ToString(page.NextMarker)
					if marker == "" {
						marker = v1[len(v1)-1]
					}
				}
				expectEqual(v1, all, "ListObjects (V1) with markers")
			},
		})
		return nil
	})

	suite.Check("small-files", "awkward key names: put, list (also encoding-type=url), get", func(ctx context.Context) error {
		awkwardKeys(func(key string, body []byte) { put(key, body) }, func(want []string) {
			got, _ := keys(c, B, "odd/", 0, "")
			expectEqual(got, want, "plain listing")
			enc := must(c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(B), Prefix: aws.String("odd/"),
				EncodingType: types.EncodingTypeUrl}))
			// This SDK asks for encoding-type=url only when told to, and then hands the keys over
			// as the server sent them, percent-encoded: the caller decodes them.
			var raw, decoded []string
			for _, o := range enc.Contents {
				raw = append(raw, aws.ToString(o.Key))
				decoded = append(decoded, must(url.QueryUnescape(aws.ToString(o.Key))))
			}
			expectEqual(decoded, want, "decoded encoding-type=url listing")
			expect(strings.Contains(strings.Join(raw, "\n"), "%09"), "the tab is not percent-encoded: %q", raw)
		}, func(key string) []byte { return getBytes(key) })
		return nil
	})

	const ckpt = 16*MiB + 100

	suite.Check("checkpoint", "save ranks with the Uploader in parallel, commit marker with If-None-Match", func(ctx context.Context) error {
		// PutObjectInput of this SDK version has no IfNoneMatch: the header goes in through a
		// per-operation middleware.
		ifNoneMatch := withHeader("If-None-Match", "*")
		for _, step := range []int{100, 200, 300} {
			check(parallel(3, func(rank int) error {
				upload(fmt.Sprintf("ckpt/step-%d/rank-%d.pt", step, rank),
					bytes.NewReader(randomBytes(ckpt, int64(step*10+rank))))
				return nil
			}), "save")
			must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B),
				Key: aws.String(fmt.Sprintf("ckpt/step-%d/COMMIT", step)), Body: strings.NewReader(fmt.Sprintf("step %d", step))},
				ifNoneMatch))
		}
		_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("ckpt/step-300/COMMIT"),
			Body: strings.NewReader("again")}, ifNoneMatch)
		awsCodes.expect(err, "PreconditionFailed", 412, "a second commit")
		expectEqual(string(getBytes("ckpt/step-300/COMMIT")), "step 300", "the first marker stays")
		errs := make([]error, 2)
		var wg sync.WaitGroup
		for i := range errs {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				_, errs[i] = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("ckpt/race/COMMIT"),
					Body: strings.NewReader(fmt.Sprintf("writer %d", i))}, ifNoneMatch)
			}(i)
		}
		wg.Wait()
		winners := 0
		for _, e := range errs {
			if e == nil {
				winners++
				continue
			}
			code, status := awsError(e)
			expect(code == "PreconditionFailed" && status == 412 || code == "ConditionalRequestConflict" && status == 409,
				"the loser got %v", e)
		}
		expectEqual(winners, 1, "winners of a race")
		return nil
	})

	suite.Check("checkpoint", "load, rotate with DeleteObjects, rename by copy + delete", func(ctx context.Context) error {
		for rank := 0; rank < 3; rank++ {
			expectSameBytes(getBytes(fmt.Sprintf("ckpt/step-300/rank-%d.pt", rank)), randomBytes(ckpt, int64(3000+rank)),
				fmt.Sprintf("rank %d", rank))
		}
		old, _ := keys(c, B, "ckpt/step-100/", 0, "")
		expectEqual(len(old), 4, "objects of step 100")
		var ids []types.ObjectIdentifier
		for _, k := range old {
			ids = append(ids, types.ObjectIdentifier{Key: aws.String(k)})
		}
		del := must(c.DeleteObjects(ctx, &s3.DeleteObjectsInput{Bucket: aws.String(B), Delete: &types.Delete{Objects: ids}}))
		var deleted []string
		for _, d := range del.Deleted {
			deleted = append(deleted, aws.ToString(d.Key))
		}
		sort.Strings(deleted)
		expectEqual([]interface{}{deleted, len(del.Errors)}, []interface{}{old, 0}, "deleted")
		latest, _ := keys(c, B, "ckpt/step-300/", 0, "")
		for _, k := range latest {
			must(c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(B), Key: aws.String(strings.Replace(k, "step-300", "best", 1)),
				CopySource: aws.String(B + "/" + k)}))
			must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(B), Key: aws.String(k)}))
		}
		expectEqual(prefixes(B, "ckpt/"), []string{"ckpt/best/", "ckpt/race/", "ckpt/step-200/"}, "steps")
		expectSameBytes(getBytes("ckpt/best/rank-1.pt"), randomBytes(ckpt, 3001), "renamed rank 1")
		return nil
	})

	suite.Check("errors", "NoSuchKey, NotFound, NoSuchBucket, BucketNotEmpty, InvalidRange, 412", func(ctx context.Context) error {
		_, _, err := get(c, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("no/such/key")})
		awsCodes.expect(err, "NoSuchKey", 404, "GetObject")
		_, err = c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(B), Key: aws.String("no/such/key")})
		awsCodes.expect(err, "NotFound", 404, "HeadObject")
		_, err = c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String("go-v2-no-such-bucket")})
		awsCodes.expect(err, "NoSuchBucket", 404, "listing a missing bucket")
		_, err = c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String("go-v2-no-such-bucket")})
		awsCodes.expect(err, "NotFound", 404, "HeadBucket of a missing bucket")
		_, err = c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(B)})
		awsCodes.expect(err, "BucketNotEmpty", 409, "DeleteBucket")
		_, _, err = get(c, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt"),
			Range: aws.String("bytes=1000-2000")})
		awsCodes.expect(err, "InvalidRange", 416, "range past the end")
		_, _, err = get(c, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt"),
			IfMatch: aws.String(`"0123456789abcdef0123456789abcdef"`)})
		awsCodes.expect(err, "PreconditionFailed", 412, "If-Match")
		_, err = c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt"),
			Body: strings.NewReader("x")}, withHeader("If-Match", `"0123456789abcdef0123456789abcdef"`))
		awsCodes.expect(err, "PreconditionFailed", 412, "PutObject If-Match")
		expectEqual(string(getBytes("obj/hello.txt")), "hello from go-v2", "the object after a refused PUT")
		return nil
	})

	suite.Check("errors", "SignatureDoesNotMatch, InvalidAccessKeyId, AccessDenied", func(ctx context.Context) error {
		wrong := newAWSClient(ctx, s, s.AccessKey, s.SecretKey+"x", nil)
		_, _, err := get(wrong, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("obj/hello.txt")})
		awsCodes.expect(err, "SignatureDoesNotMatch", 403, "wrong secret")
		_, err = wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B), Key: aws.String("obj/x"),
			Body: strings.NewReader("x")})
		awsCodes.expect(err, "SignatureDoesNotMatch", 403, "wrong secret, PUT")
		_, err = newAWSClient(ctx, s, "AKIANOSUCHKEY0000000", s.SecretKey, nil).ListObjectsV2(ctx,
			&s3.ListObjectsV2Input{Bucket: aws.String(B)})
		awsCodes.expect(err, "InvalidAccessKeyId", 403, "unknown key")
		const shared = "shared-go-v2"
		must(c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(shared)}))
		must(c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(shared), Key: aws.String("r.txt"),
			Body: strings.NewReader("readable")}))
		reader := newAWSClient(ctx, s, s.ReaderAccessKey, s.ReaderSecretKey, nil)
		got, _, err := get(reader, &s3.GetObjectInput{Bucket: aws.String(shared), Key: aws.String("r.txt")})
		check(err, "the reader's GetObject")
		expectEqual(string(got), "readable", "reader")
		_, err = reader.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(shared), Key: aws.String("w.txt"),
			Body: strings.NewReader("no")})
		awsCodes.expect(err, "AccessDenied", 403, "read-only user")
		must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(shared), Key: aws.String("r.txt")}))
		must(c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(shared)}))
		return nil
	})

	suite.Check("presign", "PresignPutObject, PresignGetObject, PresignHeadObject fetched; an expired URL", func(ctx context.Context) error {
		presigner := s3.NewPresignClient(c)
		body := []byte("through a presigned PUT")
		put := must(presigner.PresignPutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(B),
			Key: aws.String("presigned/up.bin")}, s3.WithPresignExpires(2*time.Minute)))
		status, text, _ := fetch(ctx, put.Method, put.URL, put.SignedHeader, body)
		expectEqual(status, 200, "presigned PUT ("+text+")")
		got := must(presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(B),
			Key: aws.String("presigned/up.bin")}, s3.WithPresignExpires(2*time.Minute)))
		status, text, _ = fetch(ctx, got.Method, got.URL, got.SignedHeader, nil)
		expectEqual([]interface{}{status, text}, []interface{}{200, string(body)}, "presigned GET")
		head := must(presigner.PresignHeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(B),
			Key: aws.String("presigned/up.bin")}, s3.WithPresignExpires(2*time.Minute)))
		status, _, header := fetch(ctx, head.Method, head.URL, head.SignedHeader, nil)
		expectPresignedHead(status, header, body)
		short := must(presigner.PresignGetObject(ctx, &s3.GetObjectInput{Bucket: aws.String(B),
			Key: aws.String("presigned/up.bin")}, s3.WithPresignExpires(time.Second)))
		expectExpired(ctx, short.Method, short.URL, short.SignedHeader)
		return nil
	})

	suite.Check("concurrency", "64 goroutines read random 1 MiB ranges of a 64 MiB object", func(ctx context.Context) error {
		// One client and its default HTTP client, as a data loader's workers share them.
		return concurrentRangedReads(func(data []byte) { put("loader/shard.bin", data) }, func(first, last int) []byte {
			return getBytes("loader/shard.bin", func(in *s3.GetObjectInput) {
				in.Range = aws.String(fmt.Sprintf("bytes=%d-%d", first, last))
			})
		})
	})

	suite.Check("concurrency", "readers streaming during overwrites (PutObject and Uploader) see one version", func(ctx context.Context) error {
		return readersDuringOverwrites(func(int) int { return 12 * MiB }, func(v int, body []byte) {
			if v%2 == 1 {
				upload("race/obj", bytes.NewReader(body)) // multipart
			} else {
				put("race/obj", body)
			}
		}, func() func() []byte {
			reader := newAWSClient(ctx, s, s.AccessKey, s.SecretKey, nil)
			return func() []byte {
				got, _, err := get(reader, &s3.GetObjectInput{Bucket: aws.String(B), Key: aws.String("race/obj")})
				check(err, "GetObject")
				return got
			}
		})
	})

	suite.SoakCheck(awsSoak)

	suite.Check("basic", "clean up: DeleteObjects everything, DeleteBucket", func(ctx context.Context) error {
		all, _ := keys(c, B, "", 0, "")
		deleteAll(B, all)
		must(c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(B)}))
		_, err := c.HeadBucket(ctx, &s3.HeadBucketInput{Bucket: aws.String(B)})
		awsCodes.expect(err, "NotFound", 404, "HeadBucket after DeleteBucket")
		return nil
	})
}

// awsSoak is the connection-reuse soak of js_v3.mjs: one client whose HTTP client keeps at most
// two connections, a random mix of operations on twelve keys, each request under the bound.
func awsSoak(ctx context.Context, s Settings) error {
	const SB = "go-v2-reuse"
	httpClient := awshttp.NewBuildableClient().WithTransportOptions(func(t *http.Transport) {
		t.MaxConnsPerHost = 2
		t.MaxIdleConnsPerHost = 2
	})
	c := newAWSClient(ctx, s, s.AccessKey, s.SecretKey, httpClient)
	// The same pool, a wrong secret: its 403s come back on the connections the next requests use.
	wrong := newAWSClient(ctx, s, s.AccessKey, s.SecretKey+"x", httpClient)
	watch := s3.WithAPIOptions(logRetries)
	model := newSoakModel()
	fails := awsCodes.fails
	read := func(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) ([]byte, error) {
		data, _, err := awsGet(ctx, c, in, append(opts, watch)...)
		return data, err
	}
	getObject := func(ctx context.Context, in *s3.GetObjectInput, opts ...func(*s3.Options)) func() error {
		return func() error {
			_, err := read(ctx, in, opts...)
			return err
		}
	}
	in := func(key string) *s3.GetObjectInput {
		return &s3.GetObjectInput{Bucket: aws.String(SB), Key: aws.String(key)}
	}
	checksums := []types.ChecksumAlgorithm{"", "", types.ChecksumAlgorithmCrc32, types.ChecksumAlgorithmCrc32c,
		types.ChecksumAlgorithmSha1, types.ChecksumAlgorithmSha256}

	var put, get, ranged, badRange, conditions, refused, remove, copyOp, multipart, listing SoakOp
	put = SoakOp{"put", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data := model.Body(rng)
		algorithm := checksums[rng.Intn(len(checksums))]
		out := succeeds(call, "PutObject", func() (*s3.PutObjectOutput, error) {
			return c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(SB), Key: aws.String(key),
				Body: bytes.NewReader(data), ChecksumAlgorithm: algorithm}, watch)
		})
		expectEqual(aws.ToString(out.ETag), quoted(md5hex(data)), "ETag of a PUT")
		model.Set(key, data, aws.ToString(out.ETag))
		return nil
	}}
	get = soakGet(model, awsCodes, func(ctx context.Context, key string) ([]byte, error) {
		return read(ctx, in(key))
	})
	ranged = soakRanged(model, put, func(ctx context.Context, key string, first, end int) ([]byte, error) {
		// 100 bytes even where fewer are left: the server cuts a range that runs past the end.
		r := in(key)
		r.Range = aws.String(fmt.Sprintf("bytes=%d-%d", first, first+99))
		return read(ctx, r)
	})
	badRange = SoakOp{"badRange", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		data, ok := model.Get(key)
		if !ok {
			fails(call, "HeadObject", func() error {
				_, err := c.HeadObject(ctx, &s3.HeadObjectInput{Bucket: aws.String(SB), Key: aws.String(key)}, watch)
				return err
			}, "NotFound", 404)
			return nil
		}
		r := in(key)
		r.Range = aws.String(fmt.Sprintf("bytes=%d-", len(data)+5))
		fails(call, "GetObject", getObject(ctx, r), "InvalidRange", 416)
		return nil
	}}
	conditions = SoakOp{"conditions", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		if _, ok := model.Get(key); !ok {
			return put.Run(ctx, key, rng, call)
		}
		fails(call, "PutObject", func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(SB), Key: aws.String(key),
				Body: strings.NewReader("never")}, withHeader("If-None-Match", "*"), watch)
			return err
		}, "PreconditionFailed", 412)
		r := in(key)
		r.IfMatch = aws.String(quoted(strings.Repeat("0", 32)))
		fails(call, "GetObject", getObject(ctx, r), "PreconditionFailed", 412)
		// A 304 has no body, so no error code: this SDK reports it as an error with the status
		// (and a code made of the status text); what matters is the status.
		r = in(key)
		r.IfNoneMatch = aws.String(model.ETag(key))
		err := rejects(call("GetObject", getObject(ctx, r)), "GetObject If-None-Match")
		_, status := awsError(err)
		expectEqual(status, 304, fmt.Sprintf("status of GetObject If-None-Match (%v)", err))
		return nil
	}}
	refused = SoakOp{"refused", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		fails(call, "PutObject", func() error {
			_, err := wrong.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(SB), Key: aws.String(key),
				Body: bytes.NewReader(model.Body(rng))}, watch)
			return err
		}, "SignatureDoesNotMatch", 403)
		// The MD5 of nothing for a body of ten bytes: BadDigest, which the retryer must not retry.
		fails(call, "PutObject", func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String(SB), Key: aws.String(key),
				Body: strings.NewReader("some bytes"), ContentMD5: aws.String("1B2M2Y8AsgTpgAmY7PhCfg==")}, watch)
			return err
		}, "BadDigest", 400)
		if _, ok := model.Get(key); ok {
			// The SDK leaves PartNumber 0 out (an int32 whose zero means "not set"): the query
			// parameter goes in through a middleware, before signing.
			fails(call, "GetObject", getObject(ctx, in(key), withQuery("partNumber", "0")), "InvalidArgument", 400)
		}
		fails(call, "PutObject", func() error {
			_, err := c.PutObject(ctx, &s3.PutObjectInput{Bucket: aws.String("go-v2-soak-no-such-bucket"),
				Key: aws.String(key), Body: bytes.NewReader(model.Body(rng))}, watch)
			return err
		}, "NoSuchBucket", 404)
		return nil
	}}
	remove = SoakOp{"remove", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		check(call("DeleteObject", func() error {
			_, err := c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(SB), Key: aws.String(key)}, watch)
			return err
		}), "DeleteObject")
		model.Delete(key)
		return nil
	}}
	copyOp = soakCopy(model, awsCodes, func(ctx context.Context, key, source string) (string, error) {
		out, err := c.CopyObject(ctx, &s3.CopyObjectInput{Bucket: aws.String(SB), Key: aws.String(key),
			CopySource: aws.String(SB + "/" + source)}, watch)
		if err != nil {
			return "", err
		}
		return aws.ToString(out.CopyObjectResult.ETag), nil
	}, func(ctx context.Context, call SoakCall, key string, data []byte, etag string) string {
		expectEqual(etag, quoted(md5hex(data)), "ETag of a copy")
		return etag
	})
	multipart = SoakOp{"multipart", func(ctx context.Context, key string, rng *Rand, call SoakCall) error {
		created := succeeds(call, "CreateMultipartUpload", func() (*s3.CreateMultipartUploadOutput, error) {
			return c.CreateMultipartUpload(ctx, &s3.CreateMultipartUploadInput{Bucket: aws.String(SB),
				Key: aws.String(key)}, watch)
		})
		id := created.UploadId
		data := model.Body(rng)
		part := succeeds(call, "UploadPart", func() (*s3.UploadPartOutput, error) {
			return c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(SB), Key: aws.String(key),
				UploadId: id, PartNumber: 1, Body: bytes.NewReader(data)}, watch)
		})
		if rng.Float() < 0.5 {
			check(call("AbortMultipartUpload", func() error {
				_, err := c.AbortMultipartUpload(ctx, &s3.AbortMultipartUploadInput{Bucket: aws.String(SB),
					Key: aws.String(key), UploadId: id}, watch)
				return err
			}), "AbortMultipartUpload")
			fails(call, "UploadPart", func() error {
				_, err := c.UploadPart(ctx, &s3.UploadPartInput{Bucket: aws.String(SB), Key: aws.String(key),
					UploadId: id, PartNumber: 2, Body: bytes.NewReader(model.Body(rng))}, watch)
				return err
			}, "NoSuchUpload", 404)
			return nil
		}
		done := succeeds(call, "CompleteMultipartUpload", func() (*s3.CompleteMultipartUploadOutput, error) {
			return c.CompleteMultipartUpload(ctx, &s3.CompleteMultipartUploadInput{Bucket: aws.String(SB),
				Key: aws.String(key), UploadId: id, MultipartUpload: &types.CompletedMultipartUpload{
					Parts: []types.CompletedPart{{PartNumber: 1, ETag: part.ETag}}}}, watch)
		})
		model.Set(key, data, aws.ToString(done.ETag))
		return nil
	}}
	listing = soakListing(model, "ListObjectsV2", func(ctx context.Context) ([]string, error) {
		out, err := c.ListObjectsV2(ctx, &s3.ListObjectsV2Input{Bucket: aws.String(SB), Prefix: aws.String("soak/")}, watch)
		if err != nil {
			return nil, err
		}
		var got []string
		for _, o := range out.Contents {
			got = append(got, aws.ToString(o.Key))
		}
		return got, nil
	})

	must(c.CreateBucket(ctx, &s3.CreateBucketInput{Bucket: aws.String(SB)}))
	err := soak(ctx, s, []SoakOp{put, put, put, get, get, ranged, badRange, conditions, refused, remove, copyOp,
		multipart, listing}, model, awsCodes)
	if err != nil {
		return err
	}
	for _, key := range model.Stored() {
		must(c.DeleteObject(ctx, &s3.DeleteObjectInput{Bucket: aws.String(SB), Key: aws.String(key)}))
	}
	must(c.DeleteBucket(ctx, &s3.DeleteBucketInput{Bucket: aws.String(SB)}))
	return nil
}
