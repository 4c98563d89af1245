package builtin

import (
	"context"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/coordinator-project/coordinator/internal/media"
	"github.com/coordinator-project/coordinator/internal/membudget"
	"github.com/coordinator-project/coordinator/internal/params"
	"github.com/coordinator-project/coordinator/internal/wire/features"
	"github.com/coordinator-project/coordinator/internal/wire/imageparts"
	"github.com/coordinator-project/coordinator/internal/wire/legs"
	"github.com/coordinator-project/coordinator/steps"
)

// ReplaceMediaURLsType is the replace-media-urls step's config name.
const ReplaceMediaURLsType = "replace-media-urls"

// DefaultMaxMultimodalEntries is max_multimodal_entries' default: the most
// images one request may carry (each is a download and an encode leg).
// vLLM's own per-prompt default is 999 per modality (V1), no bound in
// practice; deployments set --limit-mm-per-prompt per model to single or
// low double digits, and at the few hundred to few thousand tokens an image
// takes, 64 images already fill the 32k-128k context of today's vision
// models. 0 lifts the bound.
const DefaultMaxMultimodalEntries = 64

// DefaultMaxTotalDownloadSize is max_total_download_size's default, in MB
// of 2^20 bytes: the most one request may download, all its images
// together. A downloaded image is held once, base64-encoded (4/3 of its
// size), until the request ends, so a request's images hold at most 64 ×
// 4/3 ≈ 85 MiB, and 8 such requests at once 683 MiB: within the memory
// budget's default of half the Helm chart's GOMEMLIMIT (900 of 1800 MiB),
// leaving room for their bodies and legs. It is above OpenAI's own 50 MB
// of images per request, and lets max_multimodal_entries (64) images of 1
// MB each through.
const DefaultMaxTotalDownloadSize = 64

// maxDownloadSizeMB is the largest max_download_size, in MB: the cap in
// bytes plus one must fit an int64.
const maxDownloadSizeMB = (math.MaxInt64 - 1) / (1 << 20)

// ReplaceMediaURLs inlines a chat request's images. It finds the image_url
// parts of body.messages (the parts every step sees: see imageparts.Find),
// checks those already inlined as data: URIs, downloads the others through
// an SSRF-safe media.Downloader and rewrites each downloaded part's
// image_url.url to a base64 data: URI, leaving the part's other fields
// (such as "detail") as they were. It then sets rc.Multimodal to one entry
// per image, in document order, with its media type and base64 payload.
//
// A request whose images cannot be used fails with ErrInvalidRequest when
// the client is at fault (a bad data URI, a URL it may not fetch, an image
// too large or of the wrong type) and with a plain error (502) when the
// image's origin is (a non-2xx answer, a network error, a timeout).
//
// A request's downloads together may not exceed max_total_download_size
// (ErrInvalidRequest naming the cap, HTTP 400), and their memory is drawn
// from the request's memory budget account as it arrives (an error
// wrapping membudget.ErrExhausted when it has none left).
type ReplaceMediaURLs struct {
	downloader    *media.Downloader
	maxConcurrent int
	maxEntries    int
	maxTotal      int64 // bytes, 0 for no cap
}

// replaceMediaURLsParams are the replace-media-urls step's params.
type replaceMediaURLsParams struct {
	// DownloadTimeout bounds each download as a whole (default 10s).
	DownloadTimeout time.Duration `param:"download_timeout"`
	// MaxConcurrentDownloads bounds one request's downloads in flight (default 10).
	MaxConcurrentDownloads int `param:"max_concurrent_downloads"`
	// MaxMultimodalEntries refuses requests with more images, before any
	// download (default DefaultMaxMultimodalEntries, 64); 0 is unlimited.
	MaxMultimodalEntries int `param:"max_multimodal_entries"`
	// MaxDownloadSize is the largest image downloaded, in MB of 2^20 bytes (default 10).
	MaxDownloadSize int64 `param:"max_download_size"`
	// MaxTotalDownloadSize is the most one request downloads, all its images
	// together, in MB of 2^20 bytes (default DefaultMaxTotalDownloadSize,
	// 64); 0 is unlimited.
	MaxTotalDownloadSize int64 `param:"max_total_download_size"`
	// AllowPrivateNetworks lets downloads reach RFC 1918 addresses; loopback,
	// link-local (cloud metadata), CGNAT and unique-local stay refused.
	AllowPrivateNetworks bool `param:"allow_private_networks"`
	// AllowedDomains, when set, lists the only hosts images (and their
	// redirects) may come from: exact names, case-insensitive.
	AllowedDomains []string `param:"allowed_domains"`
}

func (p *replaceMediaURLsParams) validate() error {
	switch {
	case p.DownloadTimeout <= 0:
		return fmt.Errorf("download_timeout must be positive, got %s", p.DownloadTimeout)
	case p.MaxConcurrentDownloads <= 0:
		return fmt.Errorf("max_concurrent_downloads must be positive, got %d", p.MaxConcurrentDownloads)
	case p.MaxMultimodalEntries < 0:
		return fmt.Errorf("max_multimodal_entries must be non-negative, got %d", p.MaxMultimodalEntries)
	case p.MaxDownloadSize <= 0 || p.MaxDownloadSize > maxDownloadSizeMB:
		return fmt.Errorf("max_download_size must be positive and at most %d MB, got %d", int64(maxDownloadSizeMB), p.MaxDownloadSize)
	case p.MaxTotalDownloadSize < 0 || p.MaxTotalDownloadSize > maxDownloadSizeMB:
		return fmt.Errorf("max_total_download_size must be non-negative and at most %d MB, got %d", int64(maxDownloadSizeMB), p.MaxTotalDownloadSize)
	}
	for i, d := range p.AllowedDomains {
		if strings.TrimSpace(d) == "" {
			return fmt.Errorf("allowed_domains[%d]: empty domain", i)
		}
	}
	return nil
}

// NewReplaceMediaURLsPlugin registers the replace-media-urls step type.
// Downloads use the production address policy and the system resolver.
func NewReplaceMediaURLsPlugin() steps.Plugin { return NewReplaceMediaURLsPluginWith() }

// NewReplaceMediaURLsPluginWith is NewReplaceMediaURLsPlugin with options
// for the step's downloader, such as a test's address policy or resolver.
// No config key can do what these do.
func NewReplaceMediaURLsPluginWith(opts ...media.Option) steps.Plugin {
	opts = slices.Clone(opts)
	return steps.Plugin{Type: ReplaceMediaURLsType, New: func(raw map[string]any) (steps.Step, error) {
		p := replaceMediaURLsParams{
			DownloadTimeout:        10 * time.Second,
			MaxConcurrentDownloads: 10,
			MaxMultimodalEntries:   DefaultMaxMultimodalEntries,
			MaxDownloadSize:        10,
			MaxTotalDownloadSize:   DefaultMaxTotalDownloadSize,
		}
		if err := params.Decode(raw, &p); err != nil {
			return nil, err
		}
		if err := p.validate(); err != nil {
			return nil, err
		}
		d, err := media.New(media.Config{
			Timeout:              p.DownloadTimeout,
			MaxSize:              p.MaxDownloadSize << 20,
			AllowPrivateNetworks: p.AllowPrivateNetworks,
			AllowedDomains:       p.AllowedDomains,
		}, opts...)
		if err != nil {
			return nil, err
		}
		return &ReplaceMediaURLs{downloader: d, maxConcurrent: p.MaxConcurrentDownloads,
			maxEntries: p.MaxMultimodalEntries, maxTotal: p.MaxTotalDownloadSize << 20}, nil
	}}
}

// Execute implements Step. Images are numbered from 0 in document order,
// as rc.Multimodal's Index is. Every check that needs no network (entry
// count, data URIs, URL schemes and domains) runs, in document order,
// before any download starts; downloads then run concurrently, bounded by
// max_concurrent_downloads, and the first failure cancels the others.
// Execute returns only once every download it started has ended. When ctx
// ends first, Execute returns ctx.Err() (even if a data URI is malformed:
// nothing is checked for a request already gone).
func (s *ReplaceMediaURLs) Execute(ctx context.Context, rc *steps.RequestContext) error {
	doc, err := rc.Document()
	if err != nil {
		return err
	}
	var urls []string
	var where []imageAt // where each image is, for errors
	_ = doc.ImageParts().Each(doc.Root(), func(_ int, p imageparts.Part) error {
		urls = append(urls, p.URL)
		where = append(where, imageAt{p.Message, p.Content, p.Where})
		return nil
	})
	if len(urls) == 0 {
		return nil
	}
	if s.maxEntries > 0 && len(urls) > s.maxEntries {
		return legs.Invalidf("too many multimodal entries: got %d, max %d", len(urls), s.maxEntries)
	}
	if err := ctx.Err(); err != nil {
		return err
	}

	entries := make([]features.MultimodalEntry, len(urls))
	var downloads []int // images to download, by number
	for k, u := range urls {
		entries[k].Index = k
		if !media.IsDataURI(u) {
			if err := s.downloader.Check(u); err != nil {
				return legs.Invalidf("downloading image %d: %v%s", k, err, where[k])
			}
			downloads = append(downloads, k)
			continue
		}
		mediaType, payload, err := media.ParseDataURI(u)
		if err != nil {
			return legs.Invalidf("parsing data URI at message %d part %d: %v%s", where[k].message, where[k].content, err, where[k])
		}
		entries[k].ContentType, entries[k].Base64Data = mediaType, payload
	}
	if len(downloads) == 0 {
		rc.Multimodal = entries
		return nil
	}

	images, err := s.downloadAll(ctx, urls, where, downloads)
	if err != nil {
		return err
	}
	for n, k := range downloads {
		img := images[n]
		entries[k].ContentType, entries[k].Base64Data = img.MediaType, img.Base64
		doc.ImageParts().Replace(doc.Root(), k, img.Framed, img.MediaType, img.Base64)
	}
	rc.Multimodal = entries
	return nil
}

// dataURIJSON frames a download as the JSON string "data:<media
// type>;base64,<base64>", the base64 written straight into it. Neither part
// needs escaping: the media type is one of media.ImageType's, and base64
// is plain ASCII.
var dataURIJSON = media.Framing{
	Before: func(mediaType string) string { return `"data:` + mediaType + `;base64,` },
	After:  `"`,
}

// downloadAll downloads urls[k] for each k of ks, at most s.maxConcurrent
// at a time, each framed as dataURIJSON, and returns the images in ks's
// order. The downloads share the request's quota: max_total_download_size
// and its memory budget account. The first failure cancels the other
// downloads, and gives back the memory of those done; it returns once none
// is left running. where locates each image, for errors.
func (s *ReplaceMediaURLs) downloadAll(parent context.Context, urls []string, where []imageAt, ks []int) ([]media.Image, error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	quota := media.NewQuota(s.maxTotal, membudget.FromContext(parent))
	images := make([]media.Image, len(ks))
	sem := make(chan struct{}, min(s.maxConcurrent, len(ks)))
	var (
		wg       sync.WaitGroup
		once     sync.Once
		firstErr error
	)
launch:
	for n, k := range ks {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
			break launch
		}
		if ctx.Err() != nil { // both were ready: start nothing more
			<-sem
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			img, err := s.downloader.Download(ctx, urls[k], quota, dataURIJSON)
			if err != nil {
				once.Do(func() {
					firstErr = s.downloadError(k, where[k], err)
					cancel()
				})
				return
			}
			images[n] = img
		})
	}
	wg.Wait()
	err := firstErr
	if err == nil {
		err = parent.Err()
	}
	if err != nil {
		for _, img := range images {
			quota.Drop(img)
		}
		return nil, err
	}
	return images, nil
}

// downloadError names image k, at where, in a download's error and sorts
// out whose fault it is; the context's own errors pass through unchanged.
func (s *ReplaceMediaURLs) downloadError(k int, where imageAt, err error) error {
	var me *media.Error
	switch {
	case errors.Is(err, membudget.ErrExhausted):
		return fmt.Errorf("downloading image %d: %w", k, err)
	case !errors.As(err, &me):
		return err
	case errors.Is(me, media.ErrTotalTooLarge):
		return legs.Invalidf("downloading image %d: the request's images exceed max_total_download_size, %d MB in total%s",
			k, s.maxTotal>>20, where)
	case me.ClientFault():
		return legs.Invalidf("downloading image %d: %v%s", k, me, where)
	default:
		return fmt.Errorf("downloading image %d: %w%s", k, me, where)
	}
}

// imageAt locates an image part: messages[message].content[content].
type imageAt struct {
	message, content int
	where            string // imageparts.Part.Where
}

// String is the suffix errors about the image end with.
func (a imageAt) String() string { return a.where }

var _ steps.Step = (*ReplaceMediaURLs)(nil)
