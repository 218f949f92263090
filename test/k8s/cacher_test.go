package k8s

import (
	"context"
	"fmt"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apiserver/pkg/apis/example"
	"k8s.io/apiserver/pkg/storage"
	"k8s.io/apiserver/pkg/storage/cacher"
	storagetesting "k8s.io/apiserver/pkg/storage/testing"
	clientfeatures "k8s.io/client-go/features"
)

// setupCacher puts the API server's watch cache (Cacher behind its
// CacheDelegator) over env's store, as k8s.io/apiserver's cacher tests do
// over etcd: one injected list error exercises the relist, and the cache
// is initialized before the test starts.
func setupCacher(t *testing.T, clusterScoped bool) (context.Context, storage.Interface) {
	t.Helper()
	e := setup(t)
	// With WatchListClient the cache's reflector streams instead of
	// listing, so there is no list to fail (as in the API server's tests).
	listErrors := 1
	if clientfeatures.FeatureGates().Enabled(clientfeatures.WatchListClient) {
		listErrors = 0
	}
	wrapped := &storagetesting.StorageInjectingListErrors{Interface: e.store, Errors: listErrors}
	keyFunc := func(obj runtime.Object) (string, error) { return storage.NamespaceKeyFunc(resourcePrefix, obj) }
	if clusterScoped {
		keyFunc = func(obj runtime.Object) (string, error) { return storage.NoNamespaceKeyFunc(resourcePrefix, obj) }
	}
	c, err := cacher.NewCacherFromConfig(cacher.Config{
		Storage:             wrapped,
		Versioner:           storage.APIObjectVersioner{},
		GroupResource:       schema.GroupResource{Resource: "pods"},
		EventsHistoryWindow: cacher.DefaultEventFreshDuration,
		ResourcePrefix:      resourcePrefix,
		KeyFunc:             keyFunc,
		GetAttrsFunc:        podAttrs,
		NewFunc:             func() runtime.Object { return &example.Pod{} },
		NewListFunc:         func() runtime.Object { return &example.PodList{} },
		Codec:               newCodec(),
	})
	if err != nil {
		t.Fatalf("cacher: %v", err)
	}
	t.Cleanup(c.Stop)
	// The tests expect GetList not to fail: wait until the cache's first
	// list has taken the injected error.
	ctx, cancel := context.WithTimeout(e.ctx, time.Minute)
	defer cancel()
	if err := wait.PollUntilContextCancel(ctx, 10*time.Millisecond, true, func(context.Context) (bool, error) {
		return wrapped.ErrorsConsumed()
	}); err != nil {
		t.Fatalf("injected list error not consumed: %v", err)
	}
	if err := c.Wait(e.ctx); err != nil {
		t.Fatalf("cacher wait: %v", err)
	}
	d := cacher.NewCacheDelegator(c, wrapped)
	t.Cleanup(d.Stop)
	return e.ctx, d
}

// podAttrs is the cacher tests' GetPodAttrs: a pod's labels and the fields
// its selectors filter on.
func podAttrs(obj runtime.Object) (labels.Set, fields.Set, error) {
	pod, ok := obj.(*example.Pod)
	if !ok {
		return nil, nil, fmt.Errorf("not a pod: %T", obj)
	}
	return labels.Set(pod.Labels), fields.Set{
		"spec.nodeName":      pod.Spec.NodeName,
		"spec.restartPolicy": string(pod.Spec.RestartPolicy),
		"status.phase":       string(pod.Status.Phase),
		"metadata.name":      pod.Name,
		"metadata.namespace": pod.Namespace,
	}, nil
}

// TestCacher runs the storage tests that k8s.io/apiserver's cacher tests
// run through the watch cache and need no hook into its internals
// (compaction waits, call counters, transformer swaps).
func TestCacher(t *testing.T) {
	noValidation := func(context.Context, *testing.T, string) {}
	cases := []struct {
		name string
		run  func(context.Context, *testing.T, storage.Interface)
	}{
		{"Create", func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestCreate(ctx, t, s, noValidation)
		}},
		{"CreateWithTTL", storagetesting.RunTestCreateWithTTL},
		{"CreateWithKeyExist", storagetesting.RunTestCreateWithKeyExist},
		{"Get", storagetesting.RunTestGet},
		{"UnconditionalDelete", storagetesting.RunTestUnconditionalDelete},
		{"ConditionalDelete", storagetesting.RunTestConditionalDelete},
		{"DeleteWithSuggestion", storagetesting.RunTestDeleteWithSuggestion},
		{"DeleteWithSuggestionAndConflict", storagetesting.RunTestDeleteWithSuggestionAndConflict},
		{"DeleteWithSuggestionOfDeletedObject", storagetesting.RunTestDeleteWithSuggestionOfDeletedObject},
		{"ValidateDeletionWithSuggestion", storagetesting.RunTestValidateDeletionWithSuggestion},
		{"ValidateDeletionWithOnlySuggestionValid", storagetesting.RunTestValidateDeletionWithOnlySuggestionValid},
		{"DeleteWithConflict", storagetesting.RunTestDeleteWithConflict},
		{"PreconditionalDeleteWithSuggestion", storagetesting.RunTestPreconditionalDeleteWithSuggestion},
		{"PreconditionalDeleteWithOnlySuggestionPass", storagetesting.RunTestPreconditionalDeleteWithOnlySuggestionPass},
		{"ListPaging", storagetesting.RunTestListPaging},
		{"GetListRecursivePrefix", storagetesting.RunTestGetListRecursivePrefix},
		{"NamespaceScopedList", storagetesting.RunTestNamespaceScopedList},
		{"GuaranteedUpdateWithTTL", storagetesting.RunTestGuaranteedUpdateWithTTL},
		{"GuaranteedUpdateWithConflict", storagetesting.RunTestGuaranteedUpdateWithConflict},
		{"GuaranteedUpdateWithSuggestionAndConflict", storagetesting.RunTestGuaranteedUpdateWithSuggestionAndConflict},
		{"KeySchema", storagetesting.RunTestKeySchema},
		{"Watch", storagetesting.RunTestWatch},
		{"DeleteTriggerWatch", storagetesting.RunTestDeleteTriggerWatch},
		{"WatchFromNonZero", storagetesting.RunTestWatchFromNonZero},
		{"DelayedWatchDelivery", storagetesting.RunTestDelayedWatchDelivery},
		{"WatcherTimeout", storagetesting.RunTestWatcherTimeout},
		{"WatchDeleteEventObjectHaveLatestRV", storagetesting.RunTestWatchDeleteEventObjectHaveLatestRV},
		{"WatchInitializationSignal", storagetesting.RunTestWatchInitializationSignal},
		{"NamespaceScopedWatch", storagetesting.RunTestNamespaceScopedWatch},
		{"WatchDispatchBookmarkEvents", func(ctx context.Context, t *testing.T, s storage.Interface) {
			storagetesting.RunTestWatchDispatchBookmarkEvents(ctx, t, s, true)
		}},
		{"WatchBookmarksWithCorrectResourceVersion", storagetesting.RunTestOptionalWatchBookmarksWithCorrectResourceVersion},
		{"SendInitialEventsBackwardCompatibility", storagetesting.RunSendInitialEventsBackwardCompatibility},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx, s := setupCacher(t, false)
			tc.run(ctx, t, s)
		})
	}
	t.Run("ClusterScopedWatch", func(t *testing.T) {
		ctx, s := setupCacher(t, true)
		storagetesting.RunTestClusterScopedWatch(ctx, t, s)
	})
}
