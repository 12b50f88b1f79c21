"""tests/data photos: scikit-image 0.26.0's astronaut.png, chelsea.png, coffee.png (public domain /
CC0, see tests/data/README.md) re-encoded as JPEG quality 95 with Pillow.
Usage: photos.py OUTDIR"""
import os, sys, hashlib
from PIL import Image
import skimage

D = os.path.join(os.path.dirname(skimage.__file__), 'data')
out = sys.argv[1]
os.makedirs(out, exist_ok=True)
for name in ('astronaut', 'chelsea', 'coffee'):
    src = os.path.join(D, name + '.png'); dst = os.path.join(out, name + '.jpg')
    Image.open(src).convert('RGB').save(dst, 'JPEG', quality=95)
    print('%s  %s  (from %s, sha256 %s)' % (hashlib.sha256(open(dst, 'rb').read()).hexdigest(), dst, os.path.basename(src),
                                             hashlib.sha256(open(src, 'rb').read()).hexdigest()))
