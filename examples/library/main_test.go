package main

// The README's program runs as it stands: the service and its two
// backends reach the maps before it prints them.
func Example() {
	main()
	// Output:
	// backend 1 10.0.0.1:8080/TCP active
	// backend 2 10.0.0.2:8080/TCP active
	// revnat 1 10.96.0.1:80
	// service 10.96.0.1:80/TCP master revnat=1 type=ClusterIP algorithm=random count=2 standby=0
	// service 10.96.0.1:80/TCP slot=1 backend=1
	// service 10.96.0.1:80/TCP slot=2 backend=2
}
