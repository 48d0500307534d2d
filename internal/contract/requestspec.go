package contract

// Spec is what the request asks for, as its record keeps it: the one place
// a request's spec is taken from its input.
func (in LeaseRequestInput) Spec() RequestSpec {
	return RequestSpec{Platform: in.Platform, Model: in.Model, Class: in.Class, OSVersion: in.OSVersion, ImageTag: in.ImageTag, Mode: in.Mode}
}
