// A C++ exception thrown two calls down, through a frame with a
// destructor (a cleanup landing pad, then _Unwind_Resume) to a catch.
#include <cstdio>
static volatile int sink;
struct Guard {
	~Guard() { sink++; }
};
__attribute__((noinline)) static void thrower(int n)
{
	if (n == 0)
		throw 42;
	sink = n;
}
__attribute__((noinline)) static void middle(int n)
{
	Guard g;
	thrower(n);
	sink += 2;
}
__attribute__((noinline)) static int catcher(int n)
{
	try {
		middle(n);
	} catch (int v) {
		return v;
	}
	return 0;
}
int main()
{
	int r = catcher(1) + catcher(0) + catcher(0);
	return r == 84 ? 0 : 1;
}
