package android

import (
	"cmp"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/simlock/simlock/internal/contract"
	"github.com/simlock/simlock/internal/driver"
	"github.com/simlock/simlock/internal/driver/installproc"
	"github.com/simlock/simlock/internal/runner"
)

// The Android driver's components are system images. A component is an API
// level ("36"), as ResolveSpec names it in a *driver.RuntimeMissingError;
// installing one installs the Google APIs image for the host's ABI. A
// request for an image tag names it after the level ("36;google_apis_playstore"),
// as sdkmanager's package names do; that installs the tag's image.

var _ driver.Installer = (*Driver)(nil)

const (
	// componentFootprint is the free space an image install needs: the
	// download (1-2 GB) and the unpacked image sit side by side until
	// sdkmanager is done.
	componentFootprint = 4 << 30
	// removalTimeout bounds sdkmanager --uninstall.
	removalTimeout = 5 * time.Minute
	// licensesTimeout bounds sdkmanager --licenses, which may fetch the
	// license texts first.
	licensesTimeout = 2 * time.Minute
)

// licenseAnswers answers sdkmanager --licenses: it asks whether to review
// the pending licenses, then to accept each; more y's than questions do no
// harm.
var licenseAnswers = []byte(strings.Repeat("y\n", 100))

// An install refused for a license says both: "Warning: License for
// package … not accepted." or "…licenses have not been accepted.".
var (
	licenseWord = regexp.MustCompile(`(?i)licen[cs]e`)
	notAccepted = regexp.MustCompile(`(?i)not (?:been )?accepted`)
)

func licenseRefused(output string) bool {
	return licenseWord.MatchString(output) && notAccepted.MatchString(output)
}

// userAVDHomeOr applies UserAVDHome's default, from the daemon's own
// environment as avdmanager would read it.
func userAVDHomeOr(dir string, getenv func(string) string) string {
	switch {
	case dir != "":
		return dir
	case getenv("ANDROID_AVD_HOME") != "":
		return getenv("ANDROID_AVD_HOME")
	case getenv("ANDROID_USER_HOME") != "":
		return filepath.Join(getenv("ANDROID_USER_HOME"), "avd")
	}
	if home, err := os.UserHomeDir(); err == nil {
		return filepath.Join(home, ".android", "avd")
	}
	return ""
}

// installedImage is a system image found in the SDK's directories.
type installedImage struct {
	image
	// dir is the image's directory; rel is the same relative to the SDK
	// root (system-images/android-36/google_apis/arm64-v8a), as AVDs
	// usually name it.
	dir, rel string
	// stamp is when its source.properties was written, in unix ms: a new
	// one at every install.
	stamp int64
}

func (im installedImage) receipt() string { return im.pkg + "@" + strconv.FormatInt(im.stamp, 10) }

// scanImages finds the installed system images by walking
// <sdk>/system-images/android-<api>/<tag>/<abi>/, newest level first. An
// image counts once its source.properties exists, which sdkmanager writes
// last; dot entries are skipped.
func scanImages(sdk string) ([]installedImage, error) {
	base := filepath.Join(sdk, "system-images")
	subdirs := func(dir string) ([]string, error) {
		entries, err := os.ReadDir(dir)
		if err != nil {
			return nil, err
		}
		var out []string
		for _, e := range entries {
			if strings.HasPrefix(e.Name(), ".") {
				continue
			}
			if fi, err := os.Stat(filepath.Join(dir, e.Name())); err == nil && fi.IsDir() {
				out = append(out, e.Name())
			}
		}
		return out, nil
	}
	levels, err := subdirs(base)
	if errNotExist(err) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var out []installedImage
	for _, lv := range levels {
		level, ok := strings.CutPrefix(lv, "android-")
		if !ok || level == "" {
			continue
		}
		tags, err := subdirs(filepath.Join(base, lv))
		if err != nil {
			return nil, err
		}
		for _, tag := range tags {
			abis, err := subdirs(filepath.Join(base, lv, tag))
			if err != nil {
				return nil, err
			}
			for _, abi := range abis {
				dir := filepath.Join(base, lv, tag, abi)
				fi, err := os.Stat(filepath.Join(dir, "source.properties"))
				if err != nil {
					continue // not finished, or not an image
				}
				out = append(out, installedImage{
					image: image{pkg: strings.Join([]string{"system-images", lv, tag, abi}, ";"), level: level, tag: tag, abi: abi},
					dir:   dir, rel: filepath.Join("system-images", lv, tag, abi), stamp: fi.ModTime().UnixMilli(),
				})
			}
		}
	}
	slices.SortFunc(out, func(a, b installedImage) int {
		return cmp.Or(compareLevels(b.level, a.level), strings.Compare(a.tag, b.tag), strings.Compare(a.abi, b.abi))
	})
	return out, nil
}

// plainImages is imgs without what only the component operations need.
func plainImages(imgs []installedImage) []image {
	out := make([]image, len(imgs))
	for i, im := range imgs {
		out[i] = im.image
	}
	return out
}

// bestAt is the image of level that a phone would get, as ResolveSpec picks.
func bestAt(imgs []installedImage, level string) (installedImage, bool) {
	pick, ok := pickImage(plainImages(imgs), level, contract.ClassPhone)
	if !ok {
		return installedImage{}, false
	}
	return imgs[slices.IndexFunc(imgs, func(im installedImage) bool { return im.pkg == pick.pkg })], true
}

// dirSize adds up the sizes of the files under dir; what cannot be read
// counts as nothing, since the size is for people, not decisions.
func dirSize(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() {
			if fi, err := e.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

// userAVDs lists the AVD directories of the user's AVD home: those its
// <name>.ini files point at, and its <name>.avd directories. simlock's own
// root is never one of them.
func (d *Driver) userAVDs() []string {
	home := d.userAVDHome
	if home == "" || filepath.Clean(home) == d.root || sameFile(home, d.root) {
		return nil
	}
	var dirs []string
	add := func(dir string) {
		dir = filepath.Clean(dir)
		if !slices.Contains(dirs, dir) && !strings.HasPrefix(dir, d.root+string(filepath.Separator)) {
			dirs = append(dirs, dir)
		}
	}
	inis, _ := filepath.Glob(filepath.Join(home, "*.ini"))
	for _, ini := range inis {
		props, err := readProperties(ini)
		if err != nil {
			continue
		}
		if p := props["path"]; p != "" {
			add(p)
		} else {
			add(strings.TrimSuffix(ini, ".ini") + ".avd")
		}
	}
	avds, _ := filepath.Glob(filepath.Join(home, "*.avd"))
	for _, dir := range avds {
		add(dir)
	}
	return dirs
}

// foreignUse counts, by package, the user's AVDs whose config.ini names the
// image in an image.sysdir.N entry, relative to the SDK or absolute.
func (d *Driver) foreignUse(imgs []installedImage) map[string]int {
	use := map[string]int{}
	for _, avd := range d.userAVDs() {
		cfg, err := readProperties(filepath.Join(avd, "config.ini"))
		if err != nil {
			continue
		}
		for _, im := range imgs {
			for k, v := range cfg {
				if strings.HasPrefix(k, "image.sysdir.") && namesImage(v, im) {
					use[im.pkg]++
					break
				}
			}
		}
	}
	return use
}

// namesImage reports whether an image.sysdir value is im's directory.
func namesImage(sysdir string, im installedImage) bool {
	sysdir = strings.TrimSpace(sysdir)
	if sysdir == "" {
		return false
	}
	p := filepath.Clean(filepath.FromSlash(sysdir))
	if filepath.IsAbs(p) {
		return p == im.dir || sameFile(p, im.dir)
	}
	return p == im.rel
}

func (im installedImage) info(use map[string]int) driver.ComponentInfo {
	return driver.ComponentInfo{
		Platform:       contract.PlatformAndroid,
		Version:        im.level,
		Name:           im.pkg,
		Receipt:        im.receipt(),
		SizeBytes:      dirSize(im.dir),
		ForeignDevices: use[im.pkg],
	}
}

// componentPattern is an API level, maybe followed by ;<image tag>.
var componentPattern = regexp.MustCompile(`^(\d+(?:\.\d+)?)(?:;([A-Za-z0-9_-]{1,64}))?$`)

// parseComponent splits a component into its level and image tag ("" for
// the default image).
func parseComponent(component string) (level, tag string, err error) {
	m := componentPattern.FindStringSubmatch(component)
	if m == nil {
		return "", "", contract.BadRequest("component", "%q is not an Android component: name an API level such as 36", component)
	}
	return m[1], m[2], nil
}

// tagComponent is the component of level's image of tag.
func tagComponent(level, tag string) string { return level + ";" + tag }

// scan is scanImages as a driver call.
func (d *Driver) scan(op string) ([]installedImage, error) {
	imgs, err := scanImages(d.sdk.root)
	if err != nil {
		return nil, crash(op, fmt.Errorf("read the installed system images: %w", err))
	}
	return imgs, nil
}

// FindComponent scans the SDK for the images of an API level and reports
// the one a phone would get; any image of the level makes it installed, as
// ResolveSpec sees it.
func (d *Driver) FindComponent(_ context.Context, component string) (driver.ComponentInfo, bool, error) {
	level, tag, err := parseComponent(component)
	if err != nil {
		return driver.ComponentInfo{}, false, err
	}
	imgs, err := d.scan("find-component")
	if err != nil {
		return driver.ComponentInfo{}, false, err
	}
	if tag != "" {
		// An image of the tag, the host's ABI first.
		i := slices.IndexFunc(imgs, func(im installedImage) bool { return im.level == level && im.tag == tag && im.abi == hostABI() })
		if i < 0 {
			i = slices.IndexFunc(imgs, func(im installedImage) bool { return im.level == level && im.tag == tag })
		}
		if i < 0 {
			return driver.ComponentInfo{}, false, nil
		}
		return imgs[i].info(d.foreignUse(imgs)), true, nil
	}
	im, ok := bestAt(imgs, level)
	if !ok {
		return driver.ComponentInfo{}, false, nil
	}
	return im.info(d.foreignUse(imgs)), true, nil
}

// InstallComponent installs the Google APIs image of an API level (or the
// image of the tag the component names) for the host's ABI with
// `sdkmanager --install`, reporting the percentages of its progress bars,
// unless such an image is installed already. An
// install refused for a license is a *driver.LicenseNotAcceptedError,
// unless Options.AcceptLicenses lets the driver accept them with
// `sdkmanager --licenses` and try once more. Any other failure, the run
// being stopped by ctx included, is a *driver.CrashError. Success means a
// fresh scan finds the package; the next ListCatalog and ResolveSpec read
// the installed images afresh and offer its level.
func (d *Driver) InstallComponent(ctx context.Context, component string, progress func(driver.InstallProgress)) (driver.InstallResult, error) {
	const op = "install-component"
	info, found, err := d.FindComponent(ctx, component)
	if err != nil {
		return driver.InstallResult{}, err
	}
	if found {
		return driver.InstallResult{ComponentInfo: info, AlreadyInstalled: true}, nil
	}
	stream, ok := d.run.(installproc.Streamer)
	if !ok {
		return driver.InstallResult{}, crashf(op, "the runner cannot stream sdkmanager's progress")
	}
	level, tag, _ := parseComponent(component) // FindComponent checked it
	if tag == "" {
		tag = "google_apis"
	}
	pkg := fmt.Sprintf("system-images;android-%s;%s;%s", level, tag, hostABI())
	// No timeout of its own: ctx says how long a download may take.
	cmd := runner.Cmd{Path: d.sdk.sdkmanager, Args: []string{"--install", pkg}, Env: d.env}
	install := func() (installproc.Result, error) {
		res, err := installproc.Run(ctx, stream, cmd, progress)
		d.log.Debug("ran", "cmd", cmd.String(), "exit", res.ExitCode, "err", err)
		if err != nil {
			return res, crash(op, err)
		}
		return res, nil
	}
	res, err := install()
	if err != nil {
		return driver.InstallResult{}, err
	}
	if licenseRefused(res.Output) {
		if !d.acceptLicenses {
			return driver.InstallResult{}, &driver.LicenseNotAcceptedError{Platform: contract.PlatformAndroid, ComponentName: pkg}
		}
		lres, err := d.call(ctx, op, d.sdk.sdkmanager, licensesTimeout, licenseAnswers, "--licenses")
		if err := succeeded(lres, err, op, "sdkmanager --licenses"); err != nil {
			return driver.InstallResult{}, err
		}
		if res, err = install(); err != nil {
			return driver.InstallResult{}, err
		}
		if licenseRefused(res.Output) {
			return driver.InstallResult{}, crashf(op, "sdkmanager still refuses the license of %s after sdkmanager --licenses: %s", pkg, lastLines(res.Output))
		}
	}
	if res.ExitCode != 0 {
		return driver.InstallResult{}, crashf(op, "sdkmanager --install %s exited with code %d: %s", pkg, res.ExitCode, lastLines(res.Output))
	}
	if progress != nil {
		progress(driver.InstallProgress{Step: driver.InstallVerify})
	}
	d.forgetResolved()
	imgs, err := d.scan(op)
	if err != nil {
		return driver.InstallResult{}, err
	}
	i := slices.IndexFunc(imgs, func(im installedImage) bool { return im.pkg == pkg })
	if i < 0 {
		return driver.InstallResult{}, crashf(op, "sdkmanager reported success but %s is still not installed", pkg)
	}
	return driver.InstallResult{ComponentInfo: imgs[i].info(d.foreignUse(imgs))}, nil
}

// RemoveComponent uninstalls the image whose receipt c carries with
// `sdkmanager --uninstall`, within five minutes, and checks it is gone. An
// image installed again since (another receipt) is not touched.
func (d *Driver) RemoveComponent(ctx context.Context, c driver.ComponentInfo) error {
	const op = "remove-component"
	imgs, err := d.scan(op)
	if err != nil {
		return err
	}
	i := slices.IndexFunc(imgs, func(im installedImage) bool { return im.receipt() == c.Receipt })
	if i < 0 {
		return crashf(op, "no installed system image has the receipt %s: %s is gone, or was installed again since", c.Receipt, c.Name)
	}
	pkg := imgs[i].pkg
	res, err := d.call(ctx, op, d.sdk.sdkmanager, removalTimeout, nil, "--uninstall", pkg)
	if err := succeeded(res, err, op, "sdkmanager --uninstall "+pkg); err != nil {
		return err
	}
	// A spec resolved to the image must not provision from it now.
	d.forgetResolved()
	if imgs, err = d.scan(op); err != nil {
		return err
	}
	if slices.ContainsFunc(imgs, func(im installedImage) bool { return im.pkg == pkg }) {
		return crashf(op, "sdkmanager --uninstall reported success but %s is still installed", pkg)
	}
	return nil
}

// ListComponents lists every installed system image, newest level first,
// with the user's own AVDs that use each.
func (d *Driver) ListComponents(context.Context) ([]driver.ComponentInfo, error) {
	imgs, err := d.scan("list-components")
	if err != nil {
		return nil, err
	}
	use := d.foreignUse(imgs)
	out := make([]driver.ComponentInfo, 0, len(imgs))
	for _, im := range imgs {
		out = append(out, im.info(use))
	}
	return out, nil
}

// ComponentFootprint is 4 GiB, whatever the level.
func (d *Driver) ComponentFootprint(string) int64 { return componentFootprint }

// ComponentDir is the SDK root, where sdkmanager unpacks images.
func (d *Driver) ComponentDir() string { return d.sdk.root }

// forgetResolved drops ResolveSpec's remembered choices, so that Provision
// chooses again among the images installed now.
func (d *Driver) forgetResolved() {
	d.mu.Lock()
	defer d.mu.Unlock()
	clear(d.resolved)
}
