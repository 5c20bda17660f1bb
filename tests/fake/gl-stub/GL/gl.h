/* The two OpenGL types cudaGL.h names, so the fake (which has no GL
 * interop) can declare and check its cuGraphicsGL* / cuGLGetDevices entry
 * points on machines without OpenGL headers. Found before any system
 * GL/gl.h by the fake's include path only. */
#pragma once
typedef unsigned int GLenum;
typedef unsigned int GLuint;
